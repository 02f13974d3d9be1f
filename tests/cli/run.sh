#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The kdag tool, each subcommand and its bad arguments (ctest cli):
#   tests/cli/run.sh KDAG NVCC NULL_DRIVER
# inspect is checked against what ptxas -v says of the same kernels
# (registers, shared memory) and against their source (parameters); the
# cache against a folder of entries whose use times are set here; info
# with no driver (exit 3, and why) and on the null driver.
set -u
kdag=${1:?usage: run.sh KDAG NVCC NULL_DRIVER}
nvcc=${2:?}
null_driver=${3:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# expect CODE DESCRIPTION -- COMMAND...: the exit status, output in $tmp/out
expect() {
  local want=$1 what=$2
  shift 3
  "$@" > "$tmp/out" 2> "$tmp/err"
  local got=$?
  [ "$got" = "$want" ] || fail "$what: exit $got, want $want ($(head -c 300 "$tmp/err"))"
}
json() { python3 -c "import json,sys; d=json.load(open('$tmp/out')); $1" || fail "JSON check: $1"; }

# ---- arguments ------------------------------------------------------------
expect 2 "no command" -- "$kdag"
expect 2 "an unknown command" -- "$kdag" frobnicate
grep -q "unknown command 'frobnicate'" "$tmp/err" || fail "the unknown command is not named"
expect 0 "--help" -- "$kdag" --help
grep -q "Exit status" "$tmp/out" || fail "--help lists no exit codes"
expect 0 "--version" -- "$kdag" --version
expect 2 "inspect without a file" -- "$kdag" inspect
expect 2 "inspect with two files" -- "$kdag" inspect a b
expect 1 "inspect of a missing file" -- "$kdag" inspect "$tmp/missing.cubin"
grep -q "missing.cubin: No such file" "$tmp/err" || fail "the missing file is not named"
printf '\x7fELF\x02\x01\x01\x41\x08garbage' > "$tmp/bad.cubin"
expect 1 "inspect of a non-image" -- "$kdag" inspect "$tmp/bad.cubin"
expect 2 "cache without a subcommand" -- "$kdag" cache
expect 2 "an unknown cache subcommand" -- "$kdag" cache shrink
expect 2 "prune without --max-size" -- "$kdag" cache prune --dir "$tmp/c"
expect 2 "a size that is none" -- "$kdag" cache prune --max-size 12Q --dir "$tmp/c"
grep -q "'12Q' is not a size" "$tmp/err" || fail "the bad size is not named"
expect 2 "info with an argument" -- "$kdag" info extra
touch "$tmp/afile"
expect 1 "a cache folder that is a file" -- "$kdag" cache list --dir "$tmp/afile"

# ---- inspect: against ptxas -v and the source -------------------------------
cat > "$tmp/k.cu" <<'CU'
struct P { double d[3]; char c; };
extern "C" __global__ void big(P p, long long *out, short s) { out[0] = (long long)p.d[1] + p.c + s; }
extern "C" __global__ void stage(float *y, const float *x, float a, int n) {
  __shared__ float s[250];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x % 250] = x[i % n];
  __syncthreads();
  if (i < n) y[i] += a * s[(threadIdx.x + 1) % 250];
}
CU
for sm in 80 90; do
  "$nvcc" -arch=sm_$sm -cubin -Xptxas -v -o "$tmp/k$sm.cubin" "$tmp/k.cu" > "$tmp/ptxas$sm" 2>&1 || { fail "nvcc sm_$sm"; continue; }
  expect 0 "inspect sm_$sm" -- "$kdag" --json inspect "$tmp/k$sm.cubin"
  # ptxas -v: "Compiling entry function 'big'" ... "Used N registers, ... M bytes smem"
  want=$(awk '/Compiling entry function/ {name=$7; gsub(/[^A-Za-z_]/, "", name)} /Used [0-9]+ registers/ {
           for (i = 1; i <= NF; ++i) { if ($i == "registers,") r = $(i-1); if ($i == "smem,"||$i=="smem") s = $(i-2) }
           print name, r, (s == "" ? 0 : s); s = "" }' "$tmp/ptxas$sm")
  json "
d['format'] == 'cubin' and d['arch'] == 'sm_$sm' or sys.exit('format or arch: %s %s' % (d['format'], d['arch']))
ks = {k['name']: k for k in d['kernels']}
reserved = 1024 if $sm >= 90 else 0
for line in '''$want'''.strip().splitlines():
    name, regs, smem = line.split()
    k = ks[name]
    k['registers'] == int(regs) or sys.exit('%s: %s registers, ptxas says %s' % (name, k['registers'], regs))
    want = int(smem) + reserved if int(smem) else 0
    k['shared_section_bytes'] == want or sys.exit('%s: shared section %s, ptxas says %s smem' % (name, k['shared_section_bytes'], smem))
[p['size'] for p in ks['big']['params']] == [32, 8, 2] or sys.exit('big params %s' % ks['big']['params'])
[p['offset'] for p in ks['big']['params']] == [0, 32, 40] or sys.exit('big offsets')
[p['size'] for p in ks['stage']['params']] == [8, 8, 4, 4] or sys.exit('stage params')
ks['big']['param_bytes'] == 42 or sys.exit('big param bytes %s' % ks['big']['param_bytes'])
"
done
"$nvcc" -arch=sm_90 -ptx -o "$tmp/k.ptx" "$tmp/k.cu" || fail "nvcc -ptx"
expect 0 "inspect PTX" -- "$kdag" --json inspect "$tmp/k.ptx"
json "
d['format'] == 'ptx' and d['target'] == 'sm_90' or sys.exit('format')
ks = {k['name']: [p['size'] for p in k['params']] for k in d['kernels']}
ks == {'big': [32, 8, 2], 'stage': [8, 8, 4, 4]} or sys.exit(str(ks))
"
# A fatbin with an uncompressed CUBIN and, as CUDA 13's nvcc writes by
# default, a compressed PTX entry; then one with every entry compressed.
"$nvcc" -fatbin -Xfatbin -compress=false -gencode arch=compute_80,code=sm_80 -o "$tmp/plain.fatbin" "$tmp/k.cu" 2>/dev/null ||
  "$nvcc" -fatbin -gencode arch=compute_80,code=sm_80 -o "$tmp/plain.fatbin" "$tmp/k.cu" || fail "nvcc -fatbin"
expect 0 "inspect a fatbin" -- "$kdag" --json inspect "$tmp/plain.fatbin"
json "
e = [x for x in d['entries'] if x['kind'] == 'cubin']
e and not e[0]['compressed'] or sys.exit('no uncompressed cubin entry: %s' % d['entries'])
sorted(k['name'] for k in e[0]['kernels']) == ['big', 'stage'] or sys.exit('kernels')
"
"$nvcc" -fatbin -Xfatbin -compress-all -gencode arch=compute_90,code=sm_90 -o "$tmp/packed.fatbin" "$tmp/k.cu" || fail "nvcc -compress-all"
expect 0 "inspect a compressed fatbin" -- "$kdag" --json inspect "$tmp/packed.fatbin"
json "
e = d['entries'][0]
e['compressed'] and e['uncompressed_bytes'] > e['bytes'] or sys.exit('not reported compressed: %s' % e)
sorted(k['name'] for k in e.get('kernels', [])) == ['big', 'stage'] or sys.exit('the zstd entry was not read: %s' % e)
"
expect 0 "inspect as text" -- "$kdag" inspect "$tmp/packed.fatbin"
grep -q "compressed (zstd, read unpacked)" "$tmp/out" || fail "the text does not say compressed: $(cat "$tmp/out")"
# The same with its zstd frame damaged: reported compressed and unreadable,
# never misread.
python3 -c "
import sys; d = bytearray(open('$tmp/packed.fatbin', 'rb').read())
for i in range(120, 160): d[i] ^= 0x5a
open('$tmp/damaged.fatbin', 'wb').write(d)"
expect 0 "inspect a damaged compressed fatbin" -- "$kdag" --json inspect "$tmp/damaged.fatbin"
json "
e = d['entries'][0]
e['compressed'] and 'unreadable' in e and 'kernels' not in e or sys.exit('a damaged entry was read: %s' % e)
"

# ---- cache ------------------------------------------------------------------
c=$tmp/c
mkdir -m 700 "$c"
for i in 1 2 3; do
  key=$(printf '%032x' "$i")
  head -c $((1000 * i)) /dev/zero > "$c/$key.cubin"
  touch -d "@$(( $(date +%s) - 1000 + 100 * i ))" "$c/$key.cubin"
done
echo "not an entry" > "$c/README"
expect 0 "cache list" -- "$kdag" --json cache list --dir "$c"
json "
[e['key'][-1] for e in d['list']] == ['3', '2', '1'] or sys.exit('order %s' % [e['key'] for e in d['list']])
d['entries'] == 3 and d['bytes'] == 6000 or sys.exit('totals')
"
expect 0 "cache stats" -- "$kdag" cache stats --dir "$c"
grep -q "3 entries" "$tmp/out" || fail "stats: $(cat "$tmp/out")"
expect 0 "cache prune" -- "$kdag" --json cache prune --max-size 5000 --dir "$c"
json "d['removed'] == 1 and d['removed_bytes'] == 1000 and d['entries'] == 2 or sys.exit(str(d))"
[ -e "$c/$(printf '%032x' 1).cubin" ] && fail "prune kept the least recently used entry"
expect 0 "cache clear" -- "$kdag" cache clear --dir "$c"
grep -q "removed 2 entries" "$tmp/out" || fail "clear: $(cat "$tmp/out")"
[ -e "$c/README" ] || fail "clear removed a file that is not an entry"

# ---- info -------------------------------------------------------------------
KDAG_CUDA_DRIVER_PATH=/nonexistent/libcuda.so.1 KDAG_CACHE_DIR=$c expect 3 "info without a driver" -- "$kdag" info
grep -q "no usable CUDA device: .*could not be loaded" "$tmp/out" || fail "info does not say why: $(cat "$tmp/out")"
KDAG_CUDA_DRIVER_PATH=/nonexistent/libcuda.so.1 KDAG_CACHE_DIR=$c expect 3 "info --json without a driver" -- "$kdag" info --json
json "not d['driver']['usable'] and d['driver']['reason'] and d['cache']['dir'] == '$c' or sys.exit(str(d))"
KDAG_CUDA_DRIVER_PATH=$null_driver KDAG_CACHE_DIR=$c expect 0 "info on the null driver" -- "$kdag" --json info
json "
dev = d['driver']['devices'][0]
'null driver' in dev['name'] and dev['sm_count'] > 0 or sys.exit(str(dev))
"

if [ "$failures" -gt 0 ]; then
  echo "cli: $failures failure(s)"
  exit 1
fi
echo "cli: ok"
