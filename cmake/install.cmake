# Install and export: `cmake --install build --prefix P` puts the public
# headers (never internal/), the libraries, the programs, dmlConfig.cmake
# with targets dml::core dml::gpu dml::net dml::actors dml::dml, and dml.pc
# under P. CPack makes a .deb of the same (cpack -G DEB in the build dir).
include(CMakePackageConfigHelpers)

set(DML_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/dml)
# Static libraries export their private link dependencies, dml_internal too
# (only its link options matter there: the sanitizers of a sanitized build).
set_target_properties(dml_internal PROPERTIES EXPORT_NAME internal_flags)
install(TARGETS dml_core dml_gpu dml_net dml_actors dml_all dml_internal
  EXPORT dmlTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
foreach(layer libdml net actors gpu)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/dml
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h"
    PATTERN "internal" EXCLUDE)
endforeach()
install(EXPORT dmlTargets NAMESPACE dml:: DESTINATION ${DML_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/dmlConfig.cmake.in
  ${PROJECT_BINARY_DIR}/dmlConfig.cmake INSTALL_DESTINATION ${DML_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dmlConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dmlConfig.cmake ${PROJECT_BINARY_DIR}/dmlConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake DESTINATION ${DML_CMAKE_DIR})

# pkg-config: the whole stack in one line (static libraries, so the
# dependencies' libraries are listed too).
set(DML_PC_EXTRA_LIBS "")
foreach(lib ZLIB BZIP2 LIBLZMA)
  if(${lib}_FOUND)
    string(APPEND DML_PC_EXTRA_LIBS " ${${lib}_LIBRARIES}")
  endif()
endforeach()
# The GPU kernels need the CUDA runtime where they were built in.
if(DML_HAVE_CUDA)
  string(APPEND DML_PC_EXTRA_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
# The .pc finds its prefix from its own place, ${pcfiledir} = <prefix>/<libdir>/pkgconfig,
# so an installed tree can move (and cmake --install --prefix works).
string(REGEX REPLACE "[^/]+" ".." DML_PC_UP "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
configure_file(${PROJECT_SOURCE_DIR}/cmake/dml.pc.in ${PROJECT_BINARY_DIR}/dml.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/dml.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_PACKAGE_NAME libdml-dev)
set(CPACK_PACKAGE_VENDOR "libdml")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Distributed training of linear models on CAF actors: headers, libraries, dml-train, dml-node")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "libdml developers <dml@localhost>")
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libcaf-dev (>= 0.17.6), libcapnp-dev (>= 0.9), libabsl-dev, libssl-dev, zlib1g-dev, libbz2-dev, liblzma-dev")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_GENERATOR DEB)
include(CPack)
