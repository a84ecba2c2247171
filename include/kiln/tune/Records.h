#pragma once
// Tuning records (TVM MetaSchedule's "database"). The format, one JSON object per line
// (JSON lines; files from several runs and machines are merged by concatenation):
//
//   {"kernel": "LayerNorm_1",             the kernel's name where it was tuned (information)
//    "hash": "3f2a...", "dtypes": "float16,float16->float16",
//    "shape": "8192x4096,4096->8192x4096", (KernelKey: these three identify the kernel)
//    "target": "cuda" | "cpu", "arch": "sm_90" (cuda) | "x86_64" (cpu),
//    "device": "NVIDIA H200",             the GPU's (or CPU's) name
//    "space_version": 1,                  the meaning of the knobs (kSpaceVersion); records of
//                                         another version are not used
//    "kiln_commit": "8c344c3",            information
//    "knobs": {"row_threads": 512, ...},  the candidate (tune/SearchSpace.h)
//    "status": "ok" | "wrong" | "build_failed" | "run_failed" | "timeout" | "illegal",
//    "median_us": 41.2, "min_us": 40.9, "p90_us": 42.0, "repeats": 20,   (status "ok" only)
//    "registers": 40, "spill_bytes": 0,   (cuda: ptxas' report, -1 when unknown)
//    "error": "...",                      why it is not "ok"
//    "time": "2026-11-23T04:10:00Z"}
//
// A kernel's best record is the "ok" record with the lowest median for its key, target and
// space version, preferring the same device name, then the same arch. Records that are not "ok"
// are kept (the tuner does not measure them again) and never chosen.
#include <optional>
#include <string>
#include <vector>

#include "kiln/tune/KernelKey.h"
#include "kiln/tune/SearchSpace.h"

namespace kiln::tune {

inline constexpr int kSpaceVersion = 1;

struct Record {
  std::string kernel;
  KernelKey key;
  std::string target = "cuda", arch, device;
  int space_version = kSpaceVersion;
  std::string kiln_commit;
  Candidate knobs;
  std::string status = "ok";
  double median_us = 0, min_us = 0, p90_us = 0;
  int repeats = 0;
  int registers = -1, spill_bytes = -1;
  std::string error;
  std::string time;
  bool ok() const { return status == "ok"; }
};

std::string record_to_json(const Record& r);  // one line, no newline
// UserError naming `where` (file:line) when the line is not a record.
Record record_from_json(const std::string& line, const std::string& where);

class Database {
 public:
  // Reads a records file (missing: nothing) or every *.jsonl/*.json file of a folder.
  void load(const std::string& path);
  void add(const Record& r);
  // Appends records to `path` (creating it); merges are concatenations.
  static void append(const std::string& path, const std::vector<Record>& records);
  const std::vector<Record>& records() const { return records_; }

  // Every record of the kernel on this target (any device), in file order.
  std::vector<const Record*> of(const KernelKey& key, const std::string& target) const;
  // The best "ok" record (see above); nullptr when none.
  const Record* best(const KernelKey& key, const std::string& target, const std::string& arch,
                     const std::string& device) const;

 private:
  std::vector<Record> records_;
};

// The folder `kiln compile` reads when no --records is given: $KILN_RECORDS, else
// $XDG_CACHE_HOME/kiln/records, else ~/.cache/kiln/records.
std::string default_records_path();

}  // namespace kiln::tune
