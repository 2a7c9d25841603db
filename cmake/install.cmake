# cmake/install.cmake: `cmake --install` and the Debian packages (CPack).
#
# The programs find what they need at run time relative to their own
# binary first (common/datadir.h): PREFIX/share/akfleet/kernels (the
# catalog and the demo batch), PREFIX/share/akfleet/python (the akprofile
# binding), PREFIX/lib/akfleet/libakdiscover.so; so an installed tree
# works wherever its prefix is, and one extracted with `dpkg -x` into a
# scratch root too.  Paths written into installed text files (the systemd
# units' ExecStart, akprofile.pc) take the prefix at install time, which
# is /usr for the packages (cpack) and CMAKE_INSTALL_PREFIX (default
# /usr/local) for `cmake --install`.
#
# Components, one Debian package each (docs/operations.md, "Installing
# from packages"):
#   common      akfleet-common       docs, example env files, the service user (sysusers.d)
#   coordinator akfleet-coordinator  akcoord, akcoord.service
#   worker      akfleet-worker       akworker, akworker.service
#   ctl         akfleet-ctl          akctl, akload, the catalog, libakdiscover.so
#   dev         libakprofile-dev     libakprofile.so, akprofile.h, akprofile.pc, the Python binding
include(GNUInstallDirs)
# `make install` and cpack install what is built and build nothing first
# (as `cmake --install` does): tests/integration/test_packages.c packs the
# tree it runs in while other tests run, and must not start a build there.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS akcoord  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT coordinator)
install(TARGETS akworker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT worker)
if(TARGET ak-nvrtc)
  # the CUDA backend's compile helper: akworker runs it from its own folder
  install(TARGETS ak-nvrtc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT worker)
endif()
install(TARGETS akctl akload RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ctl)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/kernels/ DESTINATION ${CMAKE_INSTALL_DATADIR}/akfleet/kernels
        COMPONENT ctl PATTERN __pycache__ EXCLUDE)
if(TARGET akdiscover)
  install(TARGETS akdiscover LIBRARY DESTINATION lib/akfleet COMPONENT ctl)
endif()

install(TARGETS akprofile_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(FILES ${CMAKE_SOURCE_DIR}/lib/akprofile/akprofile.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/lib/akprofile/python/akprofile
        DESTINATION ${CMAKE_INSTALL_DATADIR}/akfleet/python COMPONENT dev PATTERN __pycache__ EXCLUDE)
# Debian's python3 reads .pth files in /usr/lib/python3/dist-packages: with
# it, `import akprofile` works without PYTHONPATH in a package install.
file(WRITE ${CMAKE_BINARY_DIR}/install/akfleet.pth.in "@AK_PTH_DIR@\n")

install(FILES ${CMAKE_SOURCE_DIR}/docs/operations.md ${CMAKE_SOURCE_DIR}/docs/architecture.md
              ${CMAKE_SOURCE_DIR}/docs/protocol.md ${CMAKE_SOURCE_DIR}/docs/formats.md
              ${CMAKE_SOURCE_DIR}/docs/client-api.md ${CMAKE_SOURCE_DIR}/docs/profiles.md
              ${CMAKE_SOURCE_DIR}/docs/apply.md ${CMAKE_SOURCE_DIR}/docs/discover.md
              ${CMAKE_SOURCE_DIR}/docs/measurement.md ${CMAKE_SOURCE_DIR}/docs/cuda-backend.md
              ${CMAKE_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/akfleet COMPONENT common)
install(FILES ${CMAKE_SOURCE_DIR}/ops/systemd/akcoord.env ${CMAKE_SOURCE_DIR}/ops/systemd/akworker.env
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/akfleet/examples COMPONENT common)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/ops/examples/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/akfleet/examples COMPONENT common)
install(FILES ${CMAKE_SOURCE_DIR}/ops/systemd/akfleet.sysusers DESTINATION lib/sysusers.d
        RENAME akfleet.conf COMPONENT common)

# Text files that name the install prefix, written at install time (the
# prefix of `cmake --install --prefix`, or /usr under cpack).
set(AK_INSTALL_SRC ${CMAKE_SOURCE_DIR})
set(AK_INSTALL_BIN ${CMAKE_BINARY_DIR})
foreach(unit akcoord:coordinator akworker:worker)
  string(REPLACE ":" ";" pair ${unit})
  list(GET pair 0 name)
  list(GET pair 1 comp)
  install(CODE "
    set(p \"\${CMAKE_INSTALL_PREFIX}\")
    file(READ \"${AK_INSTALL_SRC}/ops/systemd/${name}.service\" unit)
    string(REPLACE \"ExecStart=/usr/bin/\" \"ExecStart=\${p}/${CMAKE_INSTALL_BINDIR}/\" unit \"\${unit}\")
    string(REPLACE \"file:///usr/share/doc/\" \"file://\${p}/${CMAKE_INSTALL_DATADIR}/doc/\" unit \"\${unit}\")
    file(WRITE \"${AK_INSTALL_BIN}/install/${name}.service\" \"\${unit}\")
    file(INSTALL \"${AK_INSTALL_BIN}/install/${name}.service\"
         DESTINATION \"\${p}/lib/systemd/system\")" COMPONENT ${comp})
endforeach()
install(CODE "
  set(AK_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${AK_INSTALL_SRC}/lib/akprofile/akprofile.pc.in\" \"${AK_INSTALL_BIN}/install/akprofile.pc\" @ONLY)
  file(INSTALL \"${AK_INSTALL_BIN}/install/akprofile.pc\"
       DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\")
  set(AK_PTH_DIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/akfleet/python\")
  configure_file(\"${AK_INSTALL_BIN}/install/akfleet.pth.in\" \"${AK_INSTALL_BIN}/install/akfleet.pth\" @ONLY)
  file(INSTALL \"${AK_INSTALL_BIN}/install/akfleet.pth\"
       DESTINATION \"\${CMAKE_INSTALL_PREFIX}/lib/python3/dist-packages\")" COMPONENT dev)

# ------------------------------------------------------------------ CPack
# `cpack -G DEB` in the build directory: one .deb per component.  The
# runtime libraries are named by their Debian 12 packages (dpkg -S on what
# the binaries link); tests/integration/test_packages.c checks each binary's
# libraries against its package's Depends.
set(CPACK_PACKAGE_NAME akfleet)
set(CPACK_PACKAGE_VENDOR akfleet)
set(CPACK_PACKAGE_CONTACT "akfleet maintainers <akfleet@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "fleet-wide GPU kernel tuner and verifier")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL common coordinator worker ctl dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_COMMON_PACKAGE_NAME akfleet-common)
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_NAME akfleet-coordinator)
set(CPACK_DEBIAN_WORKER_PACKAGE_NAME akfleet-worker)
set(CPACK_DEBIAN_CTL_PACKAGE_NAME akfleet-ctl)
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libakprofile-dev)
set(CPACK_DEBIAN_COMMON_PACKAGE_ARCHITECTURE all)
set(ak_deb_base "libc6, libzmq5, libczmq4, libprotobuf-c1, liblmdb0, libsodium23, libjansson4")
set(CPACK_DEBIAN_COMMON_PACKAGE_DEPENDS "adduser")
# libmicrohttpd12: the --metrics endpoint (akcoord and akworker only)
set(CPACK_DEBIAN_COORDINATOR_PACKAGE_DEPENDS "akfleet-common (= ${PROJECT_VERSION}), ${ak_deb_base}, libmicrohttpd12")
# the host backend builds C candidates with the system compiler (cc) and libc's headers
set(CPACK_DEBIAN_WORKER_PACKAGE_DEPENDS "akfleet-common (= ${PROJECT_VERSION}), ${ak_deb_base}, libmicrohttpd12, gcc | c-compiler, libc6-dev")
set(CPACK_DEBIAN_CTL_PACKAGE_DEPENDS "${ak_deb_base}")
set(CPACK_DEBIAN_CTL_PACKAGE_RECOMMENDS "python3")
# `akctl demo` starts a coordinator and workers from its own folder
set(CPACK_DEBIAN_CTL_PACKAGE_SUGGESTS "akfleet-coordinator, akfleet-worker, libakprofile-dev")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libc6, libsodium23, libjansson4")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "python3")
set(CPACK_DEBIAN_COMMON_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/ops/systemd/postinst)
set(CPACK_DEBIAN_COORDINATOR_DESCRIPTION "akfleet coordinator (akcoord) and its systemd unit")
set(CPACK_DEBIAN_WORKER_DESCRIPTION "akfleet worker daemon (akworker) and its systemd unit")
set(CPACK_DEBIAN_CTL_DESCRIPTION "akfleet operator tools (akctl, akload) and the operator catalog")
set(CPACK_DEBIAN_COMMON_DESCRIPTION "akfleet documentation, example configuration and service user")
set(CPACK_DEBIAN_DEV_DESCRIPTION "libakprofile: apply installed akfleet profiles (C library, header, pkg-config, Python binding)")
include(CPack)
