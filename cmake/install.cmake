# SPDX-License-Identifier: Apache-2.0
# What `cmake --install` writes: the headers, both libraries, the CMake
# package (kdag::kdag, kdag::kdag_static), kdag.pc, and the docs. Paths in
# the package are relative to where it lands, so the tree can be moved to
# any prefix.
include(CMakePackageConfigHelpers)

install(TARGETS kdag kdag_static EXPORT kdagTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/kdag DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(KDAG_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kdag)
install(EXPORT kdagTargets NAMESPACE kdag:: DESTINATION ${KDAG_CMAKE_DIR})
configure_package_config_file(cmake/kdagConfig.cmake.in ${PROJECT_BINARY_DIR}/kdagConfig.cmake
  INSTALL_DESTINATION ${KDAG_CMAKE_DIR})
# While the major version is 0 only the same minor version is compatible
# (as the SONAME says); from 1.0 on, the same major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_kdag_compat SameMinorVersion)
else()
  set(_kdag_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kdagConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_kdag_compat})
install(FILES ${PROJECT_BINARY_DIR}/kdagConfig.cmake ${PROJECT_BINARY_DIR}/kdagConfigVersion.cmake
  DESTINATION ${KDAG_CMAKE_DIR})

# kdag.pc finds the prefix from where it lies (pkg-config's pcfiledir), so
# the installed tree can move too; absolute install directories stay as
# they are.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(KDAG_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _kdag_up "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
  set(KDAG_PC_PREFIX "\${pcfiledir}/${_kdag_up}")
endif()
foreach(_kdag_dir LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_kdag_dir}}")
    set(KDAG_PC_${_kdag_dir} "${CMAKE_INSTALL_${_kdag_dir}}")
  else()
    set(KDAG_PC_${_kdag_dir} "\${prefix}/${CMAKE_INSTALL_${_kdag_dir}}")
  endif()
endforeach()
configure_file(cmake/kdag.pc.in ${PROJECT_BINARY_DIR}/kdag.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kdag.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(FILES README.md LICENSE CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
