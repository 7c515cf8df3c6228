"""The TGS DRA driver (`tgs-dra-plugin`): a kubelet DRA plugin that turns each allocated
ResourceClaim into TGS jobs, and the publisher of the node's ResourceSlice. See
docs/kubernetes.md, "The DRA driver"."""
