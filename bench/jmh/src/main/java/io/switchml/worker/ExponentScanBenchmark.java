package io.switchml.worker;

import io.switchml.bench.jmh.JvmFlags;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * The worker's block-exponent scan of one chunk, floatToIntBits(max |x|): the float max over |x| the workers used
 * until 2026-11-23 against the int max over the array read through a segment that they use now. {@code source} = cache scans the
 * same chunk every time; 100MB walks a 100 MB tensor chunk by chunk, as an all-reduce does, so each chunk comes
 * from memory. Bytes per operation are the chunk's 4 * elements.
 * <p>
 * In package io.switchml.worker because TensorView, through which the workers scan, is package-private.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsPrepend = {JvmFlags.ADD_EXPORTS, JvmFlags.NATIVE_ACCESS, JvmFlags.UNSAFE_MEMORY_ACCESS})
public class ExponentScanBenchmark
{
    static final int TENSOR_ELEMENTS = 25_000_000;

    @Param({"8192"})
    public int elements;

    @Param({"cache", "100MB"})
    public String source;

    float[] values;
    TensorView view;
    int from;

    @Setup
    public void setup()
    {
        values = new float["cache".equals(source) ? elements : TENSOR_ELEMENTS];
        final SplittableRandom random = new SplittableRandom(42);
        for (int i = 0; i < values.length; i++)
        {
            values[i] = (float)(random.nextGaussian() * 1e-3);
        }
        view = new TensorView.FloatArray(values, values);
    }

    private int nextFrom()
    {
        final int chunkFrom = from;
        from = chunkFrom + 2 * elements > values.length ? 0 : chunkFrom + elements;
        return chunkFrom;
    }

    /** The scan the workers ran until 2026-11-23: a float max over |x|. */
    @Benchmark
    public int floatMax()
    {
        final int chunkFrom = nextFrom();
        float max = 0.0f;
        for (int i = chunkFrom, end = chunkFrom + elements; i < end; i++)
        {
            max = Math.max(max, Math.abs(values[i]));
        }
        return Float.floatToIntBits(max) & 0x7FFF_FFFF;
    }

    @Benchmark
    public int intMaxOverSegment()
    {
        return view.maxAbsBits(nextFrom(), elements);
    }
}
