import io.switchml.protocol.Lanes;
import io.switchml.protocol.NativeLanes;
import io.switchml.protocol.quant.BlockFloatingPoint;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * One rank's per-element work of a 100 MB float32 all-reduce at k = 8176 (3,200 chunks: the block exponent's scan,
 * quantization into a packet, dequantization out of it), timed call by call from a fresh JVM: how long the kernels
 * take before and after the JIT has compiled them. Mode "java": the Java loops (float[] forms); "native": the segment
 * forms, which run the native kernels unless -Dswitchml.lanes.native=false. Run by bench/lanes/run.sh.
 */
public final class KernelCold
{
    public static void main(final String[] args)
    {
        final boolean nativeForms = args.length > 0 && args[0].equals("native");
        final int calls = args.length > 1 ? Integer.parseInt(args[1]) : 6;
        final int k = 8176;
        final int packets = 3200;
        final float[] src = new float[k * 8];
        final float[] dst = new float[k * 8];
        for (int i = 0; i < src.length; i++)
        {
            src[i] = (float)Math.sin(i) * 3;
        }
        final MemorySegment srcSegment = MemorySegment.ofArray(src);
        final MemorySegment dstSegment = MemorySegment.ofArray(dst);
        final UnsafeBuffer packet = new UnsafeBuffer(ByteBuffer.allocateDirect(k * 4 + 64));
        final StringBuilder line = new StringBuilder(nativeForms ?
            "segment forms (" + NativeLanes.description() + ")" : "Java loops (float[] forms)").append(", ms per call:");
        int sink = 0;
        for (int call = 0; call < calls; call++)
        {
            final long start = System.nanoTime();
            for (int p = 0; p < packets; p++)
            {
                final int from = (p % 8) * k;
                sink += BlockFloatingPoint.maxAbsBits(srcSegment, from, k);
                if (nativeForms)
                {
                    Lanes.quantize(srcSegment, from, k, 1.0e6, (1 << 27) - 1, packet, 32);
                    Lanes.dequantize(packet, 32, k, 1.0e-6, dstSegment, from);
                }
                else
                {
                    Lanes.quantize(src, from, k, 1.0e6, (1 << 27) - 1, packet, 32);
                    Lanes.dequantize(packet, 32, k, 1.0e-6, dst, from);
                }
            }
            line.append(String.format(" %.1f", (System.nanoTime() - start) / 1e6));
        }
        System.out.println(line + (sink == 42 ? "" : ""));
    }
}
