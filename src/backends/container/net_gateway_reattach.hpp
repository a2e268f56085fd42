#pragma once

namespace sandlet::container {

struct ContainerNode;
// Attaches every live sandbox of the node's root that had network through the gateway to the (new) one.
void reattach_gateway_sandboxes(ContainerNode& node) noexcept;

}  // namespace sandlet::container
