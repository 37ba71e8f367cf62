# `cpack -G DEB` in the build directory: vsocket_<version>_<arch>.deb with
# everything cmake/install.cmake installs, under /usr.
set(CPACK_PACKAGE_NAME vsocket)
set(CPACK_PACKAGE_VENDOR "vsocket")
set(CPACK_PACKAGE_CONTACT "vsocket maintainers <vsocket@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "run TCP programs over shared memory and RDMA, unchanged")
set(CPACK_PACKAGE_DESCRIPTION
  "vsocket moves TCP connections between vsocket processes onto shared-memory
rings (same host) or RDMA (other hosts), and keeps kernel TCP for every
other peer.  vsocket-run runs an unmodified program with the LD_PRELOAD
interposer libvsocket_preload.so; libvsocket and its headers give the same
paths to programs written against the explicit API.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
# Staged with DESTDIR, so that install steps see the real prefix (/usr):
# vsocket.pc is written with it.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Dependencies from the ELF files (dpkg-shlibdeps: libc6, libstdc++6,
# librdmacm1, libibverbs1, ...), and a shlibs file plus the ldconfig
# trigger for libvsocket.so.0.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Executables and shared libraries without their debug information (the
# build tree keeps it); libvsocket.a is not stripped.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
include(CPack)
