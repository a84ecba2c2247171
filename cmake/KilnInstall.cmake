# Install rules and the CMake package (find_package(kiln)): the `kiln` binary (kiln::kiln),
# libkiln_runtime (kiln::runtime) with its headers, DLPack's header, and kiln_add_model
# (cmake/kilnModel.cmake). Included from the top-level CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(KILN_PACKAGE_VERSION 0.1.0)
set(KILN_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

install(TARGETS kiln_runtime EXPORT kilnTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The binary is not exported (its build-tree include paths would travel with it): kilnConfig.cmake
# declares kiln::kiln as an imported executable at bin/kiln.
install(TARGETS kiln RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES
  ${PROJECT_SOURCE_DIR}/include/kiln/runtime/Model.h
  ${PROJECT_SOURCE_DIR}/include/kiln/runtime/kiln_abi.h
  ${PROJECT_SOURCE_DIR}/include/kiln/runtime/kiln_model.h
  ${PROJECT_SOURCE_DIR}/include/kiln/runtime/kiln_call.h
  ${PROJECT_SOURCE_DIR}/include/kiln/runtime/validate.h
  ${PROJECT_SOURCE_DIR}/include/kiln/runtime/arena_plan.h
  ${PROJECT_SOURCE_DIR}/include/kiln/runtime/tvm_ffi_export.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/runtime)
install(FILES ${DLPACK_INCLUDE_DIR}/dlpack/dlpack.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln/third_party/dlpack)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${KILN_PACKAGE_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/kilnModel.cmake DESTINATION ${KILN_INSTALL_CMAKEDIR})
