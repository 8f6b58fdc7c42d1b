package io.switchml.bench.jmh;

import io.switchml.protocol.quant.BlockFloatingPoint;
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

import java.util.concurrent.TimeUnit;

/**
 * The {@link Candidates} rewrites of quantize and maxExponent on the same 8192-element chunk as
 * {@link BlockFloatingPointBenchmark}, which measures the originals. Bytes per operation are 4 * elements.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsPrepend = {JvmFlags.ADD_EXPORTS, JvmFlags.NATIVE_ACCESS, JvmFlags.UNSAFE_MEMORY_ACCESS})
public class VectorizationBenchmark
{
    @Param({"8192"})
    public int elements;

    float[] values;
    int[] lanes;
    double scale;
    int limit;

    @Setup
    public void setup()
    {
        Candidates.checkEquivalence();
        values = Chunks.gradientLike(elements, 42);
        lanes = new int[elements];
        scale = BlockFloatingPoint.scale(BlockFloatingPoint.maxExponent(values, 0, elements), BlockFloatingPointBenchmark.WORKERS);
        limit = BlockFloatingPoint.laneLimit(BlockFloatingPointBenchmark.WORKERS);
    }

    @Benchmark
    public int[] quantizeIntClamp()
    {
        Candidates.quantizeIntClamp(values, 0, elements, scale, limit, lanes, 0);
        return lanes;
    }

    @Benchmark
    public int maxExponentEightWay()
    {
        return Candidates.maxExponentEightWay(values, 0, elements);
    }

    @Benchmark
    public int maxExponentFloatMax()
    {
        return Candidates.maxExponentFloatMax(values, 0, elements);
    }
}
