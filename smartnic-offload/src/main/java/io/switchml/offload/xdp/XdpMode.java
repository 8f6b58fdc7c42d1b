package io.switchml.offload.xdp;

/**
 * How an XDP program is attached to an interface. The backend attaches in driver mode only (see {@link
 * XdpBackend}); generic mode is reported when someone else's program sits there in it.
 */
public enum XdpMode
{
    /** Driver (native) mode: in the NIC driver's receive path, before an skb exists. */
    NATIVE,
    /** Generic (skb) mode: after the kernel built an skb, and after GRO; works on any interface. */
    GENERIC
}
