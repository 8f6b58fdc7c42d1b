package io.switchml.offload.xdp;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Ethernet + IPv4 + UDP frames for feeding the XDP program with BPF_PROG_TEST_RUN, and readers of the frames it
 * returns. IPv4 header without options, UDP checksum 0 (none), IP checksum valid.
 */
final class Frames
{
    static final int ETH = 14;
    static final int IP = 20;
    static final int UDP = 8;
    static final int PAYLOAD = ETH + IP + UDP;

    static final byte[] APPLIANCE_MAC = {0x02, 0x00, 0x00, 0x00, 0x00, 0x01};

    private Frames()
    {
    }

    static byte[] workerMac(final int address)
    {
        return new byte[] {0x02, 0x00, (byte)(address >>> 24), (byte)(address >>> 16), (byte)(address >>> 8), (byte)address};
    }

    /**
     * @param srcAddress host-order IPv4 source.
     * @param dstAddress host-order IPv4 destination.
     */
    static byte[] udp(final int srcAddress, final int srcPort, final int dstAddress, final int dstPort, final byte[] payload,
        final int payloadLength)
    {
        final ByteBuffer frame = ByteBuffer.allocate(PAYLOAD + payloadLength).order(ByteOrder.BIG_ENDIAN);
        frame.put(APPLIANCE_MAC).put(workerMac(srcAddress)).putShort((short)0x0800);
        frame.put((byte)0x45).put((byte)0).putShort((short)(IP + UDP + payloadLength)).putShort((short)1).putShort((short)0)
            .put((byte)64).put((byte)17).putShort((short)0).putInt(srcAddress).putInt(dstAddress);
        frame.putShort((short)srcPort).putShort((short)dstPort).putShort((short)(UDP + payloadLength)).putShort((short)0);
        frame.put(payload, 0, payloadLength);
        final byte[] bytes = frame.array();
        putShort(bytes, ETH + 10, ipChecksum(bytes));
        return bytes;
    }

    static int ipChecksum(final byte[] frame)
    {
        int sum = 0;
        for (int i = 0; i < IP; i += 2)
        {
            if (i != 10)
            {
                sum += ((frame[ETH + i] & 0xFF) << 8) | (frame[ETH + i + 1] & 0xFF);
            }
        }
        sum = (sum & 0xFFFF) + (sum >>> 16);
        sum = (sum & 0xFFFF) + (sum >>> 16);
        return ~sum & 0xFFFF;
    }

    static int getShort(final byte[] frame, final int offset)
    {
        return ((frame[offset] & 0xFF) << 8) | (frame[offset + 1] & 0xFF);
    }

    static int getInt(final byte[] frame, final int offset)
    {
        return (getShort(frame, offset) << 16) | getShort(frame, offset + 2);
    }

    static void putShort(final byte[] frame, final int offset, final int value)
    {
        frame[offset] = (byte)(value >>> 8);
        frame[offset + 1] = (byte)value;
    }

    static int srcAddress(final byte[] frame)
    {
        return getInt(frame, ETH + 12);
    }

    static int dstAddress(final byte[] frame)
    {
        return getInt(frame, ETH + 16);
    }

    static int srcPort(final byte[] frame)
    {
        return getShort(frame, ETH + IP);
    }

    static int dstPort(final byte[] frame)
    {
        return getShort(frame, ETH + IP + 2);
    }

    static int ipTotalLength(final byte[] frame)
    {
        return getShort(frame, ETH + 2);
    }

    static int udpLength(final byte[] frame)
    {
        return getShort(frame, ETH + IP + 4);
    }

    static int udpChecksum(final byte[] frame)
    {
        return getShort(frame, ETH + IP + 6);
    }

    static int ttl(final byte[] frame)
    {
        return frame[ETH + 8] & 0xFF;
    }

    static byte[] dstMac(final byte[] frame)
    {
        return Arrays.copyOfRange(frame, 0, 6);
    }

    static byte[] srcMac(final byte[] frame)
    {
        return Arrays.copyOfRange(frame, 6, 12);
    }

    /**
     * @return the UDP payload as the UDP length field gives it.
     */
    static byte[] payload(final byte[] frame)
    {
        return Arrays.copyOfRange(frame, PAYLOAD, PAYLOAD + udpLength(frame) - UDP);
    }
}
