#include "kiln/tune/Records.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/support/Error.h"

namespace kiln::tune {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string record_to_json(const Record& r) {
  json j;
  j["kernel"] = r.kernel;
  j["hash"] = r.key.hash;
  j["dtypes"] = r.key.dtypes;
  j["shape"] = r.key.shape;
  j["target"] = r.target;
  j["arch"] = r.arch;
  j["device"] = r.device;
  j["space_version"] = r.space_version;
  j["kiln_commit"] = r.kiln_commit;
  j["knobs"] = json::object();
  for (const auto& [k, v] : r.knobs) j["knobs"][k] = v;
  j["status"] = r.status;
  if (r.ok()) {
    j["median_us"] = r.median_us;
    j["min_us"] = r.min_us;
    j["p90_us"] = r.p90_us;
    j["repeats"] = r.repeats;
  }
  j["registers"] = r.registers;
  j["spill_bytes"] = r.spill_bytes;
  if (!r.error.empty()) j["error"] = r.error;
  j["time"] = r.time;
  return j.dump();
}

Record record_from_json(const std::string& line, const std::string& where) {
  json j;
  try {
    j = json::parse(line);
  } catch (const json::exception& e) {
    user_error("{}: not a tuning record (expected one JSON object per line): {}", where, e.what());
  }
  auto need = [&](const char* field) -> const json& {
    if (!j.is_object() || !j.contains(field)) user_error("{}: tuning record without \"{}\"", where, field);
    return j.at(field);
  };
  Record r;
  try {
    r.kernel = j.value("kernel", "");
    r.key.hash = need("hash").get<std::string>();
    r.key.dtypes = need("dtypes").get<std::string>();
    r.key.shape = need("shape").get<std::string>();
    r.target = need("target").get<std::string>();
    r.arch = j.value("arch", "");
    r.device = j.value("device", "");
    r.space_version = need("space_version").get<int>();
    r.kiln_commit = j.value("kiln_commit", "");
    for (const auto& [k, v] : need("knobs").items()) r.knobs[k] = v.get<int64_t>();
    r.status = need("status").get<std::string>();
    r.median_us = j.value("median_us", 0.0);
    r.min_us = j.value("min_us", 0.0);
    r.p90_us = j.value("p90_us", 0.0);
    r.repeats = j.value("repeats", 0);
    r.registers = j.value("registers", -1);
    r.spill_bytes = j.value("spill_bytes", -1);
    r.error = j.value("error", "");
    r.time = j.value("time", "");
  } catch (const json::exception& e) {
    user_error("{}: tuning record with a field of the wrong type: {}", where, e.what());
  }
  if (r.ok() && !(r.median_us > 0)) user_error("{}: an \"ok\" tuning record needs \"median_us\" > 0", where);
  return r;
}

void Database::load(const std::string& path) {
  std::error_code ec;
  std::vector<fs::path> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && (ext == ".jsonl" || ext == ".json")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
  } else if (fs::exists(path, ec)) {
    files.push_back(path);
  }
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      add(record_from_json(line, file.string() + ":" + std::to_string(n)));
    }
  }
}

void Database::add(const Record& r) { records_.push_back(r); }

void Database::append(const std::string& path, const std::vector<Record>& records) {
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::app);
  for (const Record& r : records) out << record_to_json(r) << "\n";
  if (!out) user_error("cannot write tuning records to {}", path);
}

std::vector<const Record*> Database::of(const KernelKey& key, const std::string& target) const {
  std::vector<const Record*> found;
  for (const Record& r : records_) {
    if (r.key == key && r.target == target && r.space_version == kSpaceVersion) found.push_back(&r);
  }
  return found;
}

const Record* Database::best(const KernelKey& key, const std::string& target, const std::string& arch,
                             const std::string& device) const {
  // Rank: same device name, then same arch; the lowest median within the best rank.
  const Record* best = nullptr;
  int best_rank = -1;
  for (const Record* r : of(key, target)) {
    if (!r->ok()) continue;
    const int rank = r->device == device ? 2 : (r->arch == arch ? 1 : -1);
    if (rank < 0) continue;
    if (rank > best_rank || (rank == best_rank && r->median_us < best->median_us)) best = r, best_rank = rank;
  }
  return best;
}

std::string default_records_path() {
  if (const char* e = std::getenv("KILN_RECORDS")) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return std::string(x) + "/kiln/records";
  if (const char* h = std::getenv("HOME")) return std::string(h) + "/.cache/kiln/records";
  return "";
}

}  // namespace kiln::tune
