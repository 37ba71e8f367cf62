# What `cmake --install` and `cpack -G DEB` put where (GNUInstallDirs):
#   lib/<multiarch>/  libvsocket.so.0, libvsocket.a, libvsocket_preload.so
#                     cmake/vsocket/ (find_package), pkgconfig/vsocket.pc
#   include/vsocket/  the public headers
#   bin/              vsocket-run, vsocket-bench
#   share/man/        vsocket-run(1), vsocket-bench(1), vsocket(7) (man/)
# libvsocket_preload.so and vsocket-run are installed by preload/.
include(CMakePackageConfigHelpers)

set(VSOCKET_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/vsocket")

set_target_properties(vsocket_static PROPERTIES EXPORT_NAME vsocket_static)
install(TARGETS vsocket vsocket_static EXPORT vsocketTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/vsocket
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")

if(TARGET vsocket-bench)
  # It links libvsocket.so: find it in this prefix's library directory
  # wherever the prefix is (a test prefix under /tmp, /usr/local, /usr).
  file(RELATIVE_PATH vsocket_bin_to_lib
    "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
  set_target_properties(vsocket-bench PROPERTIES
    INSTALL_RPATH "$ORIGIN/${vsocket_bin_to_lib}")
  install(TARGETS vsocket-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# find_package(vsocket): vsocket::vsocket (shared) and vsocket::vsocket_static.
install(EXPORT vsocketTargets NAMESPACE vsocket::
  DESTINATION ${VSOCKET_CMAKE_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/vsocketConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vsocketConfig.cmake
  INSTALL_DESTINATION ${VSOCKET_CMAKE_DIR})
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/vsocketConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/vsocketConfig.cmake
  ${PROJECT_BINARY_DIR}/vsocketConfigVersion.cmake
  DESTINATION ${VSOCKET_CMAKE_DIR})

# vsocket.pc.  Its prefix is the one of the install being made (`--prefix`,
# or /usr in the package), so it is written when installing; a prefix
# derived from ${pcfiledir} would give "-I/usr/lib/<multiarch>/pkgconfig/
# ../../../include", which pkg-config does not recognise as a system
# directory and would pass to every compile.
set(VSOCKET_PC_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
# What libvsocket.a needs besides (pkg-config --static): the C++ runtime,
# threads, dl, and each built backend's INSTALL_LIBRARIES (vsocket_backend:
# rdma-core's librdmacm and libibverbs, liburing).  They are
# named in Libs.private rather than as Requires.private: pkg-config would
# otherwise refuse even the shared `--libs vsocket` without rdma-core's
# development .pc files, and add libnl's include path to every Cflags.
set(VSOCKET_PC_LIBS_PRIVATE "")
vsocket_backend_field(backend_install_libraries INSTALL_LIBRARIES)
foreach(lib IN LISTS backend_install_libraries)
  string(APPEND VSOCKET_PC_LIBS_PRIVATE "-l${lib} ")
endforeach()
string(APPEND VSOCKET_PC_LIBS_PRIVATE "-lpthread")
if(CMAKE_DL_LIBS)
  string(APPEND VSOCKET_PC_LIBS_PRIVATE " -l${CMAKE_DL_LIBS}")
endif()
string(APPEND VSOCKET_PC_LIBS_PRIVATE " -lstdc++ -lm")
foreach(dir LIBDIR INCLUDEDIR)  # relative to ${prefix} unless given absolute
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${dir}}")
    set(VSOCKET_PC_${dir} "${CMAKE_INSTALL_${dir}}")
  else()
    set(VSOCKET_PC_${dir} "\${prefix}/${CMAKE_INSTALL_${dir}}")
  endif()
endforeach()
set(VSOCKET_PC_PREFIX "@VSOCKET_PC_PREFIX@")  # kept for the install step
configure_file(${PROJECT_SOURCE_DIR}/cmake/vsocket.pc.in
  ${PROJECT_BINARY_DIR}/vsocket.pc.in @ONLY)
install(CODE "
  set(VSOCKET_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/vsocket.pc.in\"
                 \"${PROJECT_BINARY_DIR}/install-pc/vsocket.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/install-pc/vsocket.pc DESTINATION ${VSOCKET_PC_DIR})

include(${PROJECT_SOURCE_DIR}/cmake/package.cmake)
