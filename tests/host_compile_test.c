/* SPDX-License-Identifier: Apache-2.0 */
/* Host lane: NVRTC on the CPU, PTX parsing and checks, image inspection. */
#include <unistd.h>

#include "cuda/driver.h"
#include "compile/image_kernels.h"
#include "compile/ptx.h"
#include "session/borrow.h"
#include "kdag_test.h"
#include "kernels/embedded.h"

Test(host_compile, nvrtc_compiles_add_to_ptx_naming_the_entry) {
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "compute_90"};
  kd_binary *b = NULL;
  KDT_OK(kd_nvrtc_compile((const char *)kd_kernel_add_source, &o, &b));
  cr_assert_eq(kd_binary_kind_of(b), KD_BINARY_PTX);
  const char *ptx = kd_binary_data(b);
  cr_assert_eq(ptx[kd_binary_size(b) - 1], '\0', "PTX size counts its NUL");
  cr_assert(strstr(ptx, ".entry add_kernel"), "PTX lacks the entry: %.200s", ptx);
  kd_ptx_info info;
  KDT_OK(kd_ptx_parse("test", ptx, &info));
  const kd_ptx_entry *e = kd_ptx_find(&info, "add_kernel");
  cr_assert_not_null(e);
  cr_assert_eq(e->param_count, 4);
  cr_assert_eq(e->param_sizes[0], 8);
  cr_assert_eq(e->param_sizes[2], 8);
  cr_assert_eq(e->param_sizes[3], 4);
  cr_assert_geq(info.isa, 80);
  cr_assert_str_eq(info.target, "sm_90");
  cr_assert_str_eq(kd_binary_arch(b), "compute_90");
  kd_ptx_info_free(&info);
  kd_binary_destroy(b);
}

Test(host_compile, nvrtc_sm_arch_gives_cubin_for_that_arch) {
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "sm_80"};
  kd_binary *b = NULL;
  KDT_OK(kd_nvrtc_compile((const char *)kd_kernel_add_source, &o, &b));
  cr_assert_eq(kd_binary_kind_of(b), KD_BINARY_CUBIN);
  kd_image_info info = kd_image_inspect(kd_binary_data(b), kd_binary_size(b));
  cr_assert_eq(info.kind, KD_IMAGE_CUBIN);
  cr_assert_eq(info.sm[0], 80);
  cr_assert_eq(kd_image_runs_on(&info, 90), 0);
  cr_assert_eq(kd_image_runs_on(&info, 86), 1);
  kd_binary_destroy(b);
}

Test(host_compile, nvrtc_lto_and_options) {
  /* Each option reaches NVRTC: the source compiles only if the include
   * folder, both defines (with KD_SCALE's value) and the standard do. */
  char *dir = kdt_temp_dir();
  char header[64];
  snprintf(header, sizeof header, "%s/kd_probe.h", dir);
  kdt_write_file(header, "#define KD_PROBE_HEADER 1\n");
  const char *inc[] = {dir};
  const char *defs[] = {"KD_SCALE=3", "KD_FLAG"};
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "sm_90", .std = "c++17", .include_paths = inc, .include_path_count = 1,
                        .defines = defs, .define_count = 2, .lto = 1};
  const char *src =
      "#include <kd_probe.h>\n"
      "#ifndef KD_FLAG\n#error KD_FLAG missing\n#endif\n"
      "static_assert(KD_SCALE == 3, \"KD_SCALE\");\n"
      "static_assert(KD_PROBE_HEADER == 1, \"include path\");\n"
      "static_assert(__cplusplus >= 201703L, \"-std=c++17\");\n"
      "extern \"C\" __global__ void k(int *x) { x[0] = KD_SCALE; }\n";
  kd_binary *b = NULL;
  KDT_OK(kd_nvrtc_compile(src, &o, &b));
  cr_assert_eq(kd_binary_kind_of(b), KD_BINARY_LTOIR);
  cr_assert_gt(kd_binary_size(b), 0);
  kd_binary_destroy(b);
  o.std = "c++14"; /* the same source refused shows the standard was passed */
  KDT_FAILS(kd_nvrtc_compile(src, &o, &b), KD_ERR_COMPILE_FAILED, "-std=c++17");
  kdt_remove_dir(dir);
}

Test(host_compile, compile_error_carries_the_full_log) {
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "compute_90", .program_name = "broken.cu"};
  kd_binary *b = (kd_binary *)0x1;
  const char *src = "extern \"C\" __global__ void k(float *x) { x[0] = undeclared_name; }\n";
  KDT_FAILS(kd_nvrtc_compile(src, &o, &b), KD_ERR_COMPILE_FAILED, "undeclared_name");
  cr_assert_null(b);
  cr_assert(strstr(kd_last_error(), "broken.cu"), "%s", kd_last_error());
  cr_assert(strstr(kd_last_error(), "kd_nvrtc_compile"), "%s", kd_last_error());
}

Test(host_compile, bad_options_are_invalid_arguments) {
  kd_binary *b;
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options)};
  KDT_FAILS(kd_nvrtc_compile("x", &o, &b), KD_ERR_INVALID_ARGUMENT, "arch is required");
  KDT_FAILS(kd_nvrtc_compile("x", NULL, &b), KD_ERR_INVALID_ARGUMENT, "arch is required");
  o.arch = "gfx90a";
  KDT_FAILS(kd_nvrtc_compile("x", &o, &b), KD_ERR_INVALID_ARGUMENT, "neither sm_XX nor compute_XX");
  o.arch = "sm_90";
  KDT_FAILS(kd_nvrtc_compile(NULL, &o, &b), KD_ERR_INVALID_ARGUMENT, "source");
  const char *defs[] = {NULL};
  o.defines = defs;
  o.define_count = 1;
  KDT_FAILS(kd_nvrtc_compile("x", &o, &b), KD_ERR_INVALID_ARGUMENT, "defines[0]");
  o.defines = NULL;
  KDT_FAILS(kd_nvrtc_compile("x", &o, &b), KD_ERR_INVALID_ARGUMENT, "options->defines is NULL but its count is not 0");
  o.define_count = SIZE_MAX; /* counts are checked one by one: their sum cannot wrap past the limit */
  KDT_FAILS(kd_nvrtc_compile("x", &o, &b), KD_ERR_INVALID_ARGUMENT, "define_count is above");
  o.define_count = 0;
  o.arch = "sm_90_an_architecture_name_far_too_long";
  KDT_FAILS(kd_nvrtc_compile("x", &o, &b), KD_ERR_INVALID_ARGUMENT, "longer than 31 characters");
  kd_link_options lo = {.struct_size = sizeof(kd_link_options), .arch = "sm_90_an_architecture_name_far_too_long"};
  kd_link_input in = {.kind = KD_BINARY_PTX, .data = "x", .size = 2};
  KDT_FAILS(kd_nvjitlink_link(&in, 1, &lo, &b), KD_ERR_INVALID_ARGUMENT, "longer than 31 characters");
  KDT_FAILS(kd_binary_from_memory(KD_BINARY_CUBIN, "x", 1, "sm_90_an_architecture_name_far_too_long", 0, &b),
            KD_ERR_INVALID_ARGUMENT, "argument arch");
  KDT_FAILS(kd_binary_from_memory((kd_binary_kind)99, "x", 1, "sm_90", 0, &b), KD_ERR_INVALID_ARGUMENT,
            "argument kind 99 is not a kd_binary_kind");
  KDT_FAILS(kd_binary_from_memory(KD_BINARY_LTOIR, "not lto-ir", 10, "sm_90", 0, &b), KD_ERR_INVALID_ARGUMENT,
            "is not LTO-IR");
  KDT_FAILS(kd_binary_from_memory(KD_BINARY_PTX, "no nul", 6, "sm_90", 0, &b), KD_ERR_INVALID_ARGUMENT,
            "PTX must end with its NUL");
  KDT_FAILS(kd_binary_from_memory(KD_BINARY_CUBIN, "x", 1, "sm_90", -1, &b), KD_ERR_INVALID_ARGUMENT,
            "argument producer_version -1 is negative");
  cr_assert_null(b, "a refused binary leaves *out NULL");
}

/* A -D longer than any fixed buffer reaches NVRTC whole (it was cut at 4095
 * characters, silently, while the cache key hashed all of it). */
Test(host_compile, a_long_define_is_passed_whole) {
  static char def[6000];
  memset(def, 'A', sizeof def - 1);
  memcpy(def, "KD_LONG=", 8);
  def[sizeof def - 2] = 'Z'; /* the macro's value ends in Z only if nothing was cut */
  const char *defs[] = {def};
  kd_nvrtc_options o = {.struct_size = sizeof(kd_nvrtc_options), .arch = "compute_90", .defines = defs, .define_count = 1};
  const char *src = "#define STR2(x) #x\n#define STR(x) STR2(x)\n"
                    "static_assert(sizeof(STR(KD_LONG)) == 5991 + 1, \"KD_LONG was cut\");\n"
                    "extern \"C\" __global__ void k(int *x) { x[0] = 1; }\n";
  kd_binary *b = NULL;
  KDT_OK(kd_nvrtc_compile(src, &o, &b));
  kd_binary_destroy(b);
  /* A space does not split an option: NVRTC takes each string whole. */
  const char *spaced[] = {"KD_SUM=1 + 2"};
  o.defines = spaced;
  const char *sum = "static_assert((KD_SUM) * 2 == 6, \"KD_SUM was split\");\n"
                    "extern \"C\" __global__ void k(int *x) { x[0] = KD_SUM; }\n";
  KDT_OK(kd_nvrtc_compile(sum, &o, &b));
  kd_binary_destroy(b);
}

Test(host_compile, ptx_text_rules_follow_the_seed) {
  const char *ok = ".version 8.0\n.target sm_80\n";
  KDT_OK(kd_ptx_check_text("t", ok, strlen(ok) + 1));
  KDT_FAILS(kd_ptx_check_text("t", ok, strlen(ok)), KD_ERR_INVALID_ARGUMENT, "missing terminating NUL");
  char inner[] = ".version 8.0\0.target sm_80\n";
  KDT_FAILS(kd_ptx_check_text("t", inner, sizeof inner), KD_ERR_INVALID_ARGUMENT, "interior NUL at byte 12");
  KDT_FAILS(kd_ptx_check_text("t", NULL, 4), KD_ERR_INVALID_ARGUMENT, "ptx is NULL");
  KDT_FAILS(kd_ptx_check_text("t", ok, 0), KD_ERR_INVALID_ARGUMENT, "missing terminating NUL");
}

Test(host_compile, newer_ptx_isa_than_the_driver_is_refused) {
  KDT_OK(kd_ptx_check_isa("t", 90, 90, 13000));
  KDT_FAILS(kd_ptx_check_isa("t", 91, 90, 13000), KD_ERR_UNSUPPORTED_PTX, "PTX ISA 9.1 is newer than this driver (CUDA 13.0)");
  KDT_OK(kd_ptx_check_isa("t", 99, 0, 99000)); /* unknown driver: the driver decides */
  cr_assert_eq(kd_driver_max_ptx_isa(13000), 90);
  cr_assert_eq(kd_driver_max_ptx_isa(12080), 87);
  cr_assert_eq(kd_driver_max_ptx_isa(12040), 84);
  cr_assert_eq(kd_driver_max_ptx_isa(13010), 0);
}

Test(host_compile, ptx_signatures_parse_structs_and_arrays) {
  const char *ptx =
      "// comment .entry fake(\n.version 8.5\n.target sm_90, debug\n.address_size 64\n"
      ".visible .entry k(\n\t.param .u64 .ptr .global .align 4 k_param_0,\n"
      "\t.param .align 8 .b8 k_param_1[24],\n\t.param .f64 k_param_2,\n\t.param .u8 k_param_3\n)\n{ ret; }\n"
      ".visible .entry none()\n{ ret; }\n";
  kd_ptx_info info;
  KDT_OK(kd_ptx_parse("t", ptx, &info));
  cr_assert_eq(info.isa, 85);
  cr_assert_eq(info.entry_count, 2);
  const kd_ptx_entry *k = kd_ptx_find(&info, "k");
  cr_assert_eq(k->param_count, 4);
  cr_assert_eq(k->param_sizes[0], 8);
  cr_assert_eq(k->param_sizes[1], 24);
  cr_assert_eq(k->param_sizes[2], 8);
  cr_assert_eq(k->param_sizes[3], 1);
  cr_assert_eq(kd_ptx_find(&info, "none")->param_count, 0);
  cr_assert_null(kd_ptx_find(&info, "fake"));
  kd_ptx_info_free(&info);
  KDT_FAILS(kd_ptx_parse("t", "hello", &info), KD_ERR_INVALID_ARGUMENT, "not PTX");
}

/* A version whose digits overflow an int (found by tests/fuzz/fuzz_ptx.c:
 * sscanf's %d wrapped it to a negative ISA, which passed the driver's ISA
 * check) is no version; nor is a minor of two digits. */
Test(host_compile, a_ptx_version_out_of_range_is_not_read) {
  kd_ptx_info info;
  static const char *const bad[] = {".version 8.0000000000000000000007294580610237639338\n.target sm_90\n",
                                    ".version 99999999999.0\n", ".version 8.10\n", ".version 0.5\n", ".version 8\n"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i)
    KDT_FAILS(kd_ptx_parse("t", bad[i], &info), KD_ERR_INVALID_ARGUMENT, "not PTX");
  KDT_OK(kd_ptx_parse("t", ".version 8.0 /* first */\n.version 1.0\n", &info));
  cr_assert_eq(info.isa, 80);
  kd_ptx_info_free(&info);
}

/* A parameter word of dots alone, as long as the parser's word buffer: its
 * last part is "." (found by the fuzzer: the type check read past the
 * buffer, which the sanitized build of this test reports). */
Test(host_compile, a_parameter_word_of_dots_is_no_type) {
  char ptx[512];
  int n = snprintf(ptx, sizeof ptx, ".version 8.0\n.entry t(");
  memset(ptx + n, '.', 200);
  snprintf(ptx + n + 200, sizeof ptx - (size_t)n - 200, " a)\n{ }\n");
  kd_ptx_info info;
  KDT_OK(kd_ptx_parse("t", ptx, &info));
  cr_assert_eq(info.entry_count, 1);
  cr_assert_eq(info.entries[0].params_known, 0, "a list of no known type is left to the driver");
  kd_ptx_info_free(&info);
}

/* The PTX ISA's joined attribute words (".ptr.global.align 16"), a
 * comment that opens mid-line over a commented-out .entry, and signatures
 * kdag cannot size (.texref, more than KD_PTX_MAX_PARAMS parameters): the
 * last are listed with params_known 0, for the driver to judge, instead of
 * failing the whole module. */
Test(host_compile, ptx_signatures_in_every_form_parse_or_are_left_to_the_driver) {
  char ptx[16384];
  int n = snprintf(ptx, sizeof ptx,
                   ".version 8.5\n.target sm_90\n.address_size 64\n.reg .b32 %%r<5>; /* opens here\n"
                   ".visible .entry hidden(.param .u32 a)\n{ ret; } */\n"
                   ".file 1 \"x.entry y(\"\n"
                   ".visible .entry joined(\n.param .u32 .ptr.global.align 16 p, .param .u64 .ptr.align 8 q,\n"
                   ".param .u32 .ptr .const .align 4 r)\n{ ret; }\n"
                   ".visible .entry tex(.param .texref t, .param .u32 a)\n{ ret; }\n"
                   ".visible .entry many(");
  for (int i = 0; i <= KD_PTX_MAX_PARAMS; ++i)
    n += snprintf(ptx + n, sizeof ptx - (size_t)n, "%s.param .u32 a%d", i ? ", " : "", i);
  snprintf(ptx + n, sizeof ptx - (size_t)n, ")\n{ ret; }\n.visible .entry after(.param .f32 x)\n{ ret; }\n");
  kd_ptx_info info;
  KDT_OK(kd_ptx_parse("t", ptx, &info));
  cr_assert_null(kd_ptx_find(&info, "hidden"), "an .entry inside a comment opened mid-line");
  cr_assert_null(kd_ptx_find(&info, "y"), "an .entry inside a string");
  const kd_ptx_entry *j = kd_ptx_find(&info, "joined");
  cr_assert(j && j->params_known && j->param_count == 3, "joined: %u parameters", j ? j->param_count : 0);
  cr_assert(j->param_sizes[0] == 4 && j->param_sizes[1] == 8 && j->param_sizes[2] == 4);
  const kd_ptx_entry *t = kd_ptx_find(&info, "tex"), *m = kd_ptx_find(&info, "many");
  cr_assert(t && !t->params_known, "a .texref parameter is not sized by kdag");
  cr_assert(m && !m->params_known, "more than %d parameters", KD_PTX_MAX_PARAMS);
  const kd_ptx_entry *a = kd_ptx_find(&info, "after");
  cr_assert(a && a->params_known && a->param_count == 1 && a->param_sizes[0] == 4, "the entry after them");
  kd_ptx_info_free(&info);
}

Test(host_compile, embedded_images_name_their_architectures) {
  kd_image_info c90 = kd_image_inspect(kd_kernel_add_cubin, kd_kernel_add_cubin_size);
  kd_image_info c80 = kd_image_inspect(kd_kernel_add_cubin_sm80, kd_kernel_add_cubin_sm80_size);
  cr_assert_eq(c90.kind, KD_IMAGE_CUBIN);
  cr_assert_eq(c90.sm[0], atoi(kd_kernel_arch + 3));
  cr_assert_eq(c80.sm[0], 80);
  char buf[64];
  kd_image_describe(&c80, buf, sizeof buf);
  cr_assert_str_eq(buf, "sm_80");
  kd_image_info junk = kd_image_inspect("not an image at all", 20);
  cr_assert_eq(junk.kind, KD_IMAGE_UNKNOWN);
  cr_assert_eq(kd_image_runs_on(&junk, 90), -1);
}

Test(host_borrow, many_readers_or_one_writer_per_scope) {
  kd_borrow b = {0};
  KDT_OK(kd_borrow_shared(&b, 1, "t", "x"));
  KDT_OK(kd_borrow_shared(&b, 1, "t", "x"));
  KDT_FAILS(kd_borrow_exclusive(&b, 1, "t", "x"), KD_ERR_BORROW_CONFLICT, "2 read-only borrows");
  /* A new scope starts clean. */
  KDT_OK(kd_borrow_exclusive(&b, 2, "t", "x"));
  KDT_FAILS(kd_borrow_exclusive(&b, 2, "t", "x"), KD_ERR_BORROW_CONFLICT, "already mutably borrowed");
  KDT_FAILS(kd_borrow_shared(&b, 2, "t", "x"), KD_ERR_BORROW_CONFLICT, "cannot also be read");
  KDT_OK(kd_borrow_shared(&b, 3, "t", "x"));
}

Test(host_compile, truncated_and_crafted_images_are_not_read_past_their_end) {
  /* A CUBIN cut short: its section headers now lie past the bytes given. */
  kd_image_info cut = kd_image_inspect(kd_kernel_add_cubin, kd_kernel_add_cubin_size / 2);
  cr_assert_eq(cut.kind, KD_IMAGE_TRUNCATED);
  cr_assert_eq(kd_image_runs_on(&cut, 90), -1);
  /* A fatbin whose entry claims a header larger than the body. */
  unsigned char fat[64] = {0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0, 48, 0};
  fat[16] = 2;                   /* ELF entry */
  fat[20] = 0xff, fat[21] = 0xff; /* header size 65535 */
  fat[24] = 0xf0, fat[31] = 0xff; /* huge payload */
  kd_image_info f = kd_image_inspect(fat, sizeof fat);
  cr_assert_eq(f.kind, KD_IMAGE_TRUNCATED, "refused, not passed to the driver as a fatbin of no arch");
  cr_assert_eq(kd_image_runs_on(&f, 90), -1);
  /* A CUBIN whose program headers are 1 byte apart: a 56-byte header read
   * at the last one would run past the end. */
  unsigned char *img = malloc(kd_kernel_add_cubin_size);
  cr_assert(img);
  memcpy(img, kd_kernel_add_cubin, kd_kernel_add_cubin_size);
  img[54] = 1, img[55] = 0; /* e_phentsize */
  cr_assert_eq(kd_image_inspect(img, kd_kernel_add_cubin_size).kind, KD_IMAGE_TRUNCATED);
  memcpy(img, kd_kernel_add_cubin, kd_kernel_add_cubin_size);
  img[62] = 0xfe, img[63] = 0xff; /* e_shstrndx past the sections */
  cr_assert_eq(kd_image_inspect(img, kd_kernel_add_cubin_size).kind, KD_IMAGE_TRUNCATED);
  free(img);
}

/* A fatbin of entries (kind, arch) with empty payloads, as nvcc lays them
 * out: a 16-byte header, then 32-byte entry headers. */
static size_t fatbin_of(unsigned char *buf, const int (*entries)[2], int n) {
  memset(buf, 0, 16 + 32 * (size_t)n);
  buf[0] = 0x50, buf[1] = 0xed, buf[2] = 0x55, buf[3] = 0xba, buf[4] = 1, buf[6] = 16;
  uint64_t body = 32 * (uint64_t)n;
  for (int i = 0; i < 8; ++i) buf[8 + i] = (unsigned char)(body >> (8 * i));
  for (int i = 0; i < n; ++i) {
    unsigned char *e = buf + 16 + 32 * i;
    e[0] = (unsigned char)entries[i][0];
    e[4] = 32; /* entry header size; payload size 0 */
    e[28] = (unsigned char)entries[i][1];
  }
  return 16 + body;
}

/* Archs are counted once each, and a fatbin with more distinct ones than
 * kdag lists is never refused on the CPU: the driver decides. Only the
 * first 16 entries were read, so an sm_90 entry after 16 others made a
 * loadable image KD_ERR_NO_BINARY_FOR_GPU. */
Test(host_compile, a_fatbin_with_many_entries_is_judged_on_all_of_them) {
  unsigned char buf[16 + 32 * 24];
  int entries[24][2];
  for (int i = 0; i < 20; ++i) entries[i][0] = 2, entries[i][1] = 80; /* 20 objects for sm_80 */
  entries[20][0] = 2, entries[20][1] = 90;
  kd_image_info same = kd_image_inspect(buf, fatbin_of(buf, entries, 21));
  cr_assert_eq(same.kind, KD_IMAGE_FATBIN);
  cr_assert_eq(same.sm_count, 2, "sm_80 once, then sm_90");
  cr_assert_eq(kd_image_runs_on(&same, 90), 1);
  for (int i = 0; i < 24; ++i) entries[i][0] = 2, entries[i][1] = 30 + i; /* 24 distinct archs, none sm_9x */
  kd_image_info many = kd_image_inspect(buf, fatbin_of(buf, entries, 24));
  cr_assert(many.more && many.sm_count == 16);
  cr_assert_eq(kd_image_runs_on(&many, 90), -1, "an arch past the list may be the one: the driver decides");
  char d[256];
  kd_image_describe(&many, d, sizeof d);
  cr_assert(strstr(d, "sm_30 sm_31") && strstr(d, " ..."), "%s", d);
  entries[3][1] = 90; /* in the list: */
  kd_image_info listed = kd_image_inspect(buf, fatbin_of(buf, entries, 24));
  cr_assert_eq(kd_image_runs_on(&listed, 90), 1);
}

static uint32_t le32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* A CUBIN whose symbol table links to a NOBITS "string table" far outside
 * the image: reading a global must not follow it. */
Test(host_compile, a_symbol_table_without_its_strings_is_not_followed) {
  unsigned char *img = malloc(kd_kernel_add_cubin_size);
  cr_assert(img);
  memcpy(img, kd_kernel_add_cubin, kd_kernel_add_cubin_size);
  uint64_t shoff = le64(img + 40);
  uint32_t shentsize = (uint32_t)img[58] | (uint32_t)img[59] << 8, shnum = (uint32_t)img[60] | (uint32_t)img[61] << 8;
  int patched = 0;
  for (uint32_t i = 0; i < shnum; ++i) {
    unsigned char *sh = img + shoff + (uint64_t)i * shentsize;
    if (le32(sh + 4) != 2) continue; /* SHT_SYMTAB */
    unsigned char *str = img + shoff + (uint64_t)le32(sh + 40) * shentsize;
    str[4] = 8, str[5] = str[6] = str[7] = 0; /* SHT_NOBITS */
    memset(str + 24, 0, 16);
    str[28] = 0x7f; /* offset 0x7f00000000 */
    str[36] = 0x01; /* size 0x100000000 */
    patched = 1;
  }
  cr_assert(patched, "the embedded CUBIN has a symbol table");
  kd_binary *b;
  KDT_OK(kd_binary_from_memory(KD_BINARY_CUBIN, img, kd_kernel_add_cubin_size, "sm_90", 0, &b));
  int v[4];
  KDT_FAILS(kd_binary_read_global(b, "anything", v, sizeof v), KD_ERR_NOT_FOUND, "no symbol anything");
  kd_binary_destroy(b);
  /* Nor does the kernel reader (kdag inspect). */
  kd_image_kernel *ks;
  size_t n;
  KDT_FAILS(kd_image_kernels("test", img, kd_kernel_add_cubin_size, &ks, &n), KD_ERR_INVALID_ARGUMENT,
            "symbol table is malformed");
  free(img);
}

/* The same with the section-name table made NOBITS far outside the image:
 * the kernel reader finds no section by name, and reads nothing there. */
Test(host_compile, a_section_name_table_without_its_bytes_is_not_followed) {
  unsigned char *img = malloc(kd_kernel_add_cubin_size);
  cr_assert(img);
  memcpy(img, kd_kernel_add_cubin, kd_kernel_add_cubin_size);
  uint64_t shoff = le64(img + 40);
  uint32_t shentsize = (uint32_t)img[58] | (uint32_t)img[59] << 8, shstrndx = (uint32_t)img[62] | (uint32_t)img[63] << 8;
  unsigned char *str = img + shoff + (uint64_t)shstrndx * shentsize;
  str[4] = 8, str[5] = str[6] = str[7] = 0; /* SHT_NOBITS */
  memset(str + 24, 0, 16);
  str[28] = 0x7f; /* offset 0x7f00000000 */
  str[36] = 0x01; /* size 0x100000000 */
  kd_image_kernel *ks;
  size_t n;
  KDT_OK(kd_image_kernels("test", img, kd_kernel_add_cubin_size, &ks, &n));
  cr_assert_eq(n, 0, "no .text section can be named: %zu kernels", n);
  kd_image_kernels_free(ks, n);
  free(img);
}

Test(host_compile, long_entry_names_are_kept_whole) {
  char name[600];
  memset(name, 'k', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  char ptx[1024];
  snprintf(ptx, sizeof ptx, ".version 8.0\n.target sm_90\n.visible .entry %s(\n.param .u32 a\n)\n{ ret; }\n", name);
  kd_ptx_info info;
  KDT_OK(kd_ptx_parse("t", ptx, &info));
  cr_assert_not_null(kd_ptx_find(&info, name));
  cr_assert_eq(kd_ptx_find(&info, name)->param_count, 1);
  kd_ptx_info_free(&info);
}
