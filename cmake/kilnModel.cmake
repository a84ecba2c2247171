# kiln_add_model(<target> <model.onnx> [TARGETS cpu | sm_80 sm_90 ...] [OPTIONS <kiln compile args>...])
#
# Runs `kiln compile <model.onnx> -o <build>/<target> --model --reference --target <TARGETS>` at
# build time (again when the model changes) and adds <target>, a custom target that builds it.
# Properties of <target>:
#   KILN_MODEL_LIBRARY  the model library (load it with kiln::Model::load)
#   KILN_MODEL_DIR      its folder: the weights file, the sources, reference/ (random inputs and
#                       the CPU backend's outputs for them, reference/manifest.txt)
# TARGETS defaults to sm_90. The kiln binary is kiln::kiln (the installed one, or the build tree's).
function(kiln_add_model target model)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "TARGETS;OPTIONS")
  if(NOT arg_TARGETS)
    set(arg_TARGETS sm_90)
  endif()
  get_filename_component(model_path "${model}" ABSOLUTE)
  get_filename_component(model_stem "${model}" NAME_WE)
  string(MAKE_C_IDENTIFIER "${model_stem}" model_id)
  string(JOIN "," target_list ${arg_TARGETS})
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/${target}")
  set(library "${dir}/lib${model_id}.so")
  add_custom_command(OUTPUT "${library}"
    COMMAND kiln::kiln compile "${model_path}" -o "${dir}" --model --reference --target "${target_list}" ${arg_OPTIONS}
    DEPENDS "${model_path}"
    COMMENT "kiln: compiling ${model_stem} (${target_list}) into ${library}"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS "${library}")
  set_target_properties(${target} PROPERTIES KILN_MODEL_LIBRARY "${library}" KILN_MODEL_DIR "${dir}")
endfunction()
