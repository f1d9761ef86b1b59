package owned

// DummyInterface is the link that holds service addresses so the kernel
// accepts packets for them (kube-proxy uses the same name).
const DummyInterface = "kube-ipvs0"
