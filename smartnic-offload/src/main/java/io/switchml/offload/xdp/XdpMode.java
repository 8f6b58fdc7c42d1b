package io.switchml.offload.xdp;

/**
 * How an XDP program is attached to an interface.
 */
public enum XdpMode
{
    /** Driver (native) mode: in the NIC driver's receive path, before an skb exists. */
    NATIVE,
    /** Generic (skb) mode: after the kernel built an skb; works on any interface, slower. */
    GENERIC,
    /** Driver mode, and generic mode only if the driver refuses, reported as a fallback. */
    AUTO
}
