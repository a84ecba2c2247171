# The ONNX protobuf classes, generated at build time from the schema of the installed onnx
# Python package (setup.sh installs it from requirements-dev.txt), so that every current data
# type and field is readable. Defines the static library `kiln_onnx_proto`: the header is
# <onnx/onnx-ml.pb.h>, the namespace `onnx`, as in ONNX's own builds with ONNX_ML.
find_package(Python3 COMPONENTS Interpreter REQUIRED)
execute_process(
  COMMAND ${Python3_EXECUTABLE} -c "import onnx, os; print(os.path.dirname(onnx.__file__)); print(onnx.__version__)"
  OUTPUT_VARIABLE kiln_onnx_python_out
  ERROR_VARIABLE kiln_onnx_python_err
  RESULT_VARIABLE kiln_onnx_python_rc
  OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT kiln_onnx_python_rc EQUAL 0)
  message(FATAL_ERROR
    "kiln: the ONNX schema comes from the onnx Python package, but `${Python3_EXECUTABLE} -c "
    "\"import onnx\"` failed:\n${kiln_onnx_python_err}\n"
    "Install it with `python3 -m pip install -r requirements-dev.txt` (setup.sh does this).")
endif()
string(REPLACE "\n" ";" kiln_onnx_python_out "${kiln_onnx_python_out}")
list(GET kiln_onnx_python_out 0 KILN_ONNX_PACKAGE_DIR)
list(GET kiln_onnx_python_out 1 KILN_ONNX_VERSION)
set(kiln_onnx_schema "${KILN_ONNX_PACKAGE_DIR}/onnx-ml.proto")
if(NOT EXISTS "${kiln_onnx_schema}")
  message(FATAL_ERROR "kiln: the onnx Python package at ${KILN_ONNX_PACKAGE_DIR} has no "
                      "onnx-ml.proto; reinstall it (requirements-dev.txt)")
endif()
if(NOT Protobuf_PROTOC_EXECUTABLE)
  message(FATAL_ERROR "kiln: protoc not found; install Debian's protobuf-compiler (setup.sh)")
endif()
message(STATUS "kiln: ONNX schema from onnx ${KILN_ONNX_VERSION} (${kiln_onnx_schema})")

# protoc names the generated files after the schema's path below --proto_path: copying the
# schema to <gen>/proto/onnx/onnx-ml.proto gives <gen>/onnx/onnx-ml.pb.h, included as
# <onnx/onnx-ml.pb.h> everywhere. The wheel ships the schema made for protobuf-lite
# (`option optimize_for = LITE_RUNTIME;`, what ONNX's gen_proto.py --lite adds); kiln needs full
# messages (JSON for kiln_subgraph, reflection), so the copy drops that one option, as ONNX's
# non-lite builds do.
set(kiln_onnx_gen "${PROJECT_BINARY_DIR}/generated/onnx_proto")
file(READ "${kiln_onnx_schema}" kiln_onnx_schema_text)
string(REGEX REPLACE "option optimize_for = LITE_RUNTIME;" "" kiln_onnx_schema_text
       "${kiln_onnx_schema_text}")
file(CONFIGURE OUTPUT "${kiln_onnx_gen}/proto/onnx/onnx-ml.proto" CONTENT "${kiln_onnx_schema_text}"
     @ONLY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${kiln_onnx_schema}")
add_custom_command(
  OUTPUT "${kiln_onnx_gen}/onnx/onnx-ml.pb.h" "${kiln_onnx_gen}/onnx/onnx-ml.pb.cc"
  COMMAND ${Protobuf_PROTOC_EXECUTABLE} --proto_path=${kiln_onnx_gen}/proto
          --cpp_out=${kiln_onnx_gen} ${kiln_onnx_gen}/proto/onnx/onnx-ml.proto
  DEPENDS "${kiln_onnx_gen}/proto/onnx/onnx-ml.proto"
  COMMENT "protoc: ONNX schema of onnx ${KILN_ONNX_VERSION}"
  VERBATIM)
add_library(kiln_onnx_proto STATIC "${kiln_onnx_gen}/onnx/onnx-ml.pb.cc")
# SYSTEM: the generated header is not held to kiln's warning flags.
target_include_directories(kiln_onnx_proto SYSTEM PUBLIC "${kiln_onnx_gen}")
target_link_libraries(kiln_onnx_proto PUBLIC protobuf::libprotobuf)
