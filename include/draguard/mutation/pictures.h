// Placement pictures for `draguard convert --draw` and `draguard review --mutate --draw`: where
// a converted Pod's claim can go on each node shape it may land on, or why a Pod was refused.
//
// Pure: a function of (object, namespace, policy, topology snapshot), like the conversion itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "draguard/admission/review.h"
#include "draguard/policy/policy.h"

namespace draguard::topology {
class Snapshot;
}  // namespace draguard::topology

namespace draguard::mutation {

/// One picture: one pod spec of an object on one node shape.
struct PlacementPicture {
  /// File-name stem: "<kind>-<name>[-<pod spec index>]-<node>", lower-case kind; the node is the
  /// first of the shape's nodes the Pod may land on.
  std::string name;
  std::string svg;  ///< topology::DrawSvg of that node with the placement marks
};

/// The pictures of every pod spec of `object` that ConvertObject converts or refuses (unchanged
/// pod specs have none), in pod spec order, then shape order:
///   * converted: for each template, each node shape the Pod may land on (its node or shape
///     restriction, else every shape), with the devices each request of the template can receive
///     there in some allocation of the whole claim coloured by request (dra::PlaceClaim);
///   * refused: each shape, the reason as a red banner, and as the nearest miss (outlined in red)
///     the devices a claim of the same profile could receive there without the alignment the
///     conversion asked for (the template generated with mutation.allowUnaligned), when there is
///     such a claim.
/// Empty without a topology (no node to draw).
std::vector<PlacementPicture> DrawPlacements(const admission::Json& object, std::string_view namespace_name,
                                             const policy::Policy& policy, const topology::Snapshot* topology);

}  // namespace draguard::mutation
