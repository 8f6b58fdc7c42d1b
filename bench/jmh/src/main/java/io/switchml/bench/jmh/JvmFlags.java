package io.switchml.bench.jmh;

/**
 * Flags every forked benchmark JVM gets on JDK 25: Agrona needs jdk.internal.misc, and the other two keep the JDK
 * from warning about native access and sun.misc.Unsafe, so the output holds only results.
 */
public final class JvmFlags
{
    public static final String ADD_EXPORTS = "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED";
    public static final String NATIVE_ACCESS = "--enable-native-access=ALL-UNNAMED";
    public static final String UNSAFE_MEMORY_ACCESS = "--sun-misc-unsafe-memory-access=allow";
    /** The JDK's vector module, for the packet MACs' lanes (PacketMacBatch). */
    public static final String VECTOR_MODULE = "--add-modules=jdk.incubator.vector";

    private JvmFlags()
    {
    }
}
