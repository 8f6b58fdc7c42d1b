package io.switchml.appliance.transport;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;

/**
 * An IPv4 socket address packed into a long, so that the data plane can compare and store sender and
 * member addresses without objects: bits 47..16 hold the address (first octet most significant, as
 * {@link Inet4Address#hashCode()} gives it), bits 15..0 the port. A key is never negative;
 * {@link #NONE} stands for an address that has no key (IPv6) and matches nothing.
 */
public final class AddressKey
{
    /** No key: not an IPv4 address. Never equal to a sender's key. */
    public static final long NONE = -1L;

    private AddressKey()
    {
    }

    /**
     * @param ipv4 address in host order, first octet most significant.
     * @param port UDP port.
     * @return the key.
     */
    public static long of(final int ipv4, final int port)
    {
        return (ipv4 & 0xFFFF_FFFFL) << 16 | (port & 0xFFFF);
    }

    /**
     * Allocation-free: {@link Inet4Address#hashCode()} is its address.
     *
     * @return the key of an IPv4 socket address, else {@link #NONE}.
     */
    public static long of(final InetSocketAddress address)
    {
        final InetAddress inetAddress = address.getAddress();
        return inetAddress instanceof Inet4Address ? of(inetAddress.hashCode(), address.getPort()) : NONE;
    }

    /**
     * @return the IPv4 address of a key, first octet most significant.
     */
    public static int ipv4(final long key)
    {
        return (int)(key >>> 16);
    }

    /**
     * @return the port of a key.
     */
    public static int port(final long key)
    {
        return (int)(key & 0xFFFF);
    }

    /**
     * Allocates: for control paths and the Netty transport only.
     *
     * @return the socket address of a key.
     */
    public static InetSocketAddress toSocketAddress(final long key)
    {
        final int ip = ipv4(key);
        try
        {
            return new InetSocketAddress(InetAddress.getByAddress(
                new byte[]{(byte)(ip >>> 24), (byte)(ip >>> 16), (byte)(ip >>> 8), (byte)ip}), port(key));
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * @return "a.b.c.d:port", for messages.
     */
    public static String toString(final long key)
    {
        if (key < 0)
        {
            return "none";
        }
        final int ip = ipv4(key);
        return (ip >>> 24) + "." + (ip >>> 16 & 0xFF) + "." + (ip >>> 8 & 0xFF) + "." + (ip & 0xFF) + ":" + port(key);
    }
}
