#pragma once
// The files embedded into kiln by src/codegen/Embed.cmake. Private to codegen/.
#include <string>
#include <utility>
#include <vector>

namespace kiln::codegen {

// (name, text): "include/..." headers that generated code includes, "templates/..." boilerplate.
const std::vector<std::pair<std::string, std::string>>& embedded_files();
// The text of embedded file `name` (internal error when missing).
const std::string& embedded_file(const std::string& name);

}  // namespace kiln::codegen
