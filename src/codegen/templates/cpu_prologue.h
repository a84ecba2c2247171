// ---- prologue (src/codegen/templates/cpu_prologue.h) ----
#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <string>

#include "kiln/codegen/runtime/kiln_cpu.h"
#include "kiln/runtime/kiln_abi.h"
#include "kiln/runtime/tvm_ffi_export.h"  // KILN_TVM_FFI_EXPORT after each entry point
#include "kiln/runtime/validate.h"
// ---- end of prologue ----
