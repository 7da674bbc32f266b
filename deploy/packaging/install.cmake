# `cmake --install` and the Debian packages (CPack). Included last by the top-level
# CMakeLists.txt, once every target exists. Three components, one package each, split the
# Debian way (docs/operations.md):
#   lib      -> libhv0     libhv.so.0 and libhv.so.<version> (the runtime of training programs)
#   dev      -> libhv-dev  <hv/*.h>, libhv.so (link), libhv.a, lib/cmake/hv, lib/pkgconfig/hv.pc
#   daemons  -> hv         hvhead, hvagent, hvsubmit, hvctl, their man pages, the systemd units,
#                          example configs
# Package dependencies are computed: dpkg-shlibdeps for the shared libraries each package links
# (CPACK_DEBIAN_PACKAGE_SHLIBDEPS) and the component graph for libhv-dev -> libhv0.
# TODO(python): the Python package (worker_lib/python/) is not packaged yet (python3-hv).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HV_PKG_DIR ${CMAKE_CURRENT_LIST_DIR})
set(HV_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/hv)
# systemd reads units from /usr/lib/systemd/system (also on merged-/usr Debian 12).
set(HV_UNIT_DIR lib/systemd/system CACHE STRING "Where the systemd units go, under the prefix")

# ---- the library -----------------------------------------------------------------------------
install(TARGETS hv EXPORT hvTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_SKIP
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS hv LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev NAMELINK_ONLY)
install(TARGETS hv_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/worker_lib/include/hv
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev FILES_MATCHING PATTERN "*.h")
install(EXPORT hvTargets NAMESPACE hv:: DESTINATION ${HV_CMAKE_DIR} COMPONENT dev)
configure_package_config_file(${HV_PKG_DIR}/hvConfig.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/hvConfig.cmake INSTALL_DESTINATION ${HV_CMAKE_DIR})
# 0.x: only the same minor version is compatible (the ABI may change between 0.1 and 0.2).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/hvConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/packaging/hvConfig.cmake
  ${CMAKE_BINARY_DIR}/packaging/hvConfigVersion.cmake DESTINATION ${HV_CMAKE_DIR} COMPONENT dev)
# libhv.a of a GPU build also needs NCCL and the CUDA runtime (from outside Debian: by path).
set(HV_PC_GPU_LIBS "")
if(HV_HAVE_NCCL)
  get_filename_component(HV_NCCL_LIBDIR ${HV_NCCL_LIB} DIRECTORY)
  set(HV_PC_GPU_LIBS "-L${HV_NCCL_LIBDIR} -lnccl -L${CUDAToolkit_LIBRARY_DIR} -lcudart ")
endif()
file(RELATIVE_PATH HV_PC_PREFIX_REL "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${HV_PKG_DIR}/hv.pc.in ${CMAKE_BINARY_DIR}/packaging/hv.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/hv.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# ---- the daemons and CLIs ----------------------------------------------------------------------
install(TARGETS hvhead hvagent hvsubmit hvctl RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  COMPONENT daemons)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/hvhead.service
  ${CMAKE_SOURCE_DIR}/deploy/systemd/hvagent.service DESTINATION ${HV_UNIT_DIR} COMPONENT daemons)
# Man pages (man1), written at build time from each program's --version and --help by
# deploy/packaging/man.sh (sh and sed; gzip -9n when there is gzip, as Debian ships them).
# A cross build cannot run the programs: no man pages then, said at configure time.
option(HV_MAN_PAGES "Build man pages from the programs' --help" ON)
if(HV_MAN_PAGES AND CMAKE_CROSSCOMPILING AND NOT CMAKE_CROSSCOMPILING_EMULATOR)
  message(STATUS "hv: man pages skipped (cross-compiling: the programs cannot run here)")
elseif(HV_MAN_PAGES)
  find_program(HV_GZIP gzip)
  set(HV_MAN_SUMMARY_hvhead "the hv head: cluster state, scheduling and the elastic driver")
  set(HV_MAN_SUMMARY_hvagent "the hv node agent: joins a head and runs its workers")
  set(HV_MAN_SUMMARY_hvsubmit "submit a training job to an hv head and follow it")
  set(HV_MAN_SUMMARY_hvctl "look at and control an hv cluster")
  set(HV_MAN_SUBCOMMANDS_hvhead start stop)
  # hvctl's actor commands have their own options (--class, --slots, --max-restarts, ...).
  set(HV_MAN_SUBCOMMANDS_hvctl actor)
  set(HV_MAN_PAGES_OUT "")
  foreach(prog hvhead hvagent hvsubmit hvctl)
    set(page ${CMAKE_BINARY_DIR}/man/${prog}.1)
    set(cmds COMMAND sh ${HV_PKG_DIR}/man.sh $<TARGET_FILE:${prog}> ${prog}
      "${HV_MAN_SUMMARY_${prog}}" ${page} ${HV_MAN_SUBCOMMANDS_${prog}})
    if(HV_GZIP)
      list(APPEND cmds COMMAND ${HV_GZIP} -9nf ${page})
      string(APPEND page .gz)
    endif()
    add_custom_command(OUTPUT ${page} ${cmds} DEPENDS ${prog} ${HV_PKG_DIR}/man.sh
      COMMENT "man page ${prog}(1) from ${prog} --help" VERBATIM)
    list(APPEND HV_MAN_PAGES_OUT ${page})
  endforeach()
  add_custom_target(hv_man ALL DEPENDS ${HV_MAN_PAGES_OUT})
  install(FILES ${HV_MAN_PAGES_OUT} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT daemons)
else()
  message(STATUS "hv: man pages skipped (HV_MAN_PAGES=OFF)")
endif()
# Example configs, to copy to /etc (nothing is installed into /etc: no conffile to merge).
install(FILES ${CMAKE_SOURCE_DIR}/deploy/systemd/head.yaml
  ${CMAKE_SOURCE_DIR}/deploy/systemd/hvagent.default ${CMAKE_SOURCE_DIR}/examples/cluster.yaml
  ${CMAKE_SOURCE_DIR}/examples/local.yaml
  DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples COMPONENT daemons)
install(FILES ${CMAKE_SOURCE_DIR}/docs/operations.md ${CMAKE_SOURCE_DIR}/docs/configuration.md
  ${CMAKE_SOURCE_DIR}/docs/security.md ${CMAKE_SOURCE_DIR}/docs/tls.md
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT daemons)

# ---- Debian packages (cpack -G DEB in the build directory) -------------------------------------
set(CPACK_PACKAGE_NAME hv)
set(CPACK_PACKAGE_VENDOR "hv")
set(CPACK_PACKAGE_CONTACT "hv maintainers <hv@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "cluster service for elastic distributed training")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_GENERATOR DEB)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL lib dev daemons)
set(CPACK_COMPONENT_DEV_DEPENDS lib)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libhv0)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_COMPONENT_LIB_DESCRIPTION
  "hv worker library (runtime)\n libhv.so: allreduce, broadcast and elastic state for training programs run by hvhead.")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libhv-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "hv worker library (development files)\n Headers, libhv.a, the CMake package hv::hv and hv.pc for pkg-config.")
set(CPACK_DEBIAN_DAEMONS_PACKAGE_NAME hv)
set(CPACK_DEBIAN_DAEMONS_PACKAGE_SECTION net)
set(CPACK_COMPONENT_DAEMONS_DESCRIPTION
  "hv cluster service: hvhead, hvagent, hvsubmit, hvctl\n The head, the node agent and the clients, with systemd units.")
include(CPack)
