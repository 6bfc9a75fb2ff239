// libFuzzer target over what the claim cache reads of a watched ResourceClaim or
// ResourceClaimTemplate (kubeclaims/claim_cache.h): the object's spec as the API server sends it
// (any bytes; the seeds are claim and template specs). A summary is kept or the object is skipped;
// the store stays within its bound and answers every lookup; never a crash.
//
// Build: cmake -DDRAGUARD_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ ...; run e.g.
//   kubeclaims_fuzz -max_total_time=60 test/fuzz/seeds/kubeclaims
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "draguard/kubeclaims/claim_cache.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draguard;
  const std::string spec(reinterpret_cast<const char*>(data), size);
  constexpr std::size_t kBound = 3;
  for (const char* kind : {"ResourceClaim", "ResourceClaimTemplate"}) {
    kubeclaims::ClaimStore store(std::string(kind) + "s", kind, kBound);
    kube::Object o;
    o.namespace_name = "ml";
    o.name = "c";
    o.fields["spec"] = spec;
    // Through a list, then as events: the same object, another one, its deletion.
    std::vector<kube::Object> all(2, o);
    all[1].name = "d";
    store.OnSync(all);
    if (store.size() > kBound) std::abort();
    auto found = store.Find("ml", "c");
    if (found.state == dra::ClaimLookup::State::kFound) {
      if (found.summary == nullptr) std::abort();
      for (const auto& r : found.summary->requests) {
        for (const auto& other : found.summary->requests) (void)found.summary->NumaAligned(r.name, other.name);
      }
    }
    store.OnUpsert(o);
    o.name = "e";
    store.OnUpsert(o);
    store.OnDelete(o);
    if (store.size() > kBound) std::abort();
    (void)store.Find("ml", "e");
  }
  return 0;
}
