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
 * Block floating point on one chunk of k float32 elements, as a worker runs it for every packet: the block exponent
 * ({@link BlockFloatingPoint#maxExponent}), quantization to int32 lanes and dequantization of the summed lanes.
 * Bytes per operation are the chunk's 4 * elements input bytes.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsPrepend = {JvmFlags.ADD_EXPORTS, JvmFlags.NATIVE_ACCESS, JvmFlags.UNSAFE_MEMORY_ACCESS})
public class BlockFloatingPointBenchmark
{
    /** Workers n: the scale and lane limit depend on it. */
    static final int WORKERS = 8;

    @Param({"8192"})
    public int elements;

    float[] values;
    int[] lanes;
    int[] summedLanes;
    float[] results;
    double scale;
    int limit;
    double multiplier;

    @Setup
    public void setup()
    {
        values = Chunks.gradientLike(elements, 42);
        lanes = new int[elements];
        results = new float[elements];
        final int exponent = BlockFloatingPoint.maxExponent(values, 0, elements);
        scale = BlockFloatingPoint.scale(exponent, WORKERS);
        limit = BlockFloatingPoint.laneLimit(WORKERS);
        multiplier = 1.0 / scale;
        BlockFloatingPoint.quantize(values, 0, elements, scale, limit, lanes, 0);
        summedLanes = new int[elements];
        for (int i = 0; i < elements; i++)
        {
            summedLanes[i] = lanes[i] * WORKERS;
        }
    }

    @Benchmark
    public int[] quantize()
    {
        BlockFloatingPoint.quantize(values, 0, elements, scale, limit, lanes, 0);
        return lanes;
    }

    @Benchmark
    public float[] dequantize()
    {
        BlockFloatingPoint.dequantize(summedLanes, 0, elements, multiplier, results, 0);
        return results;
    }

    @Benchmark
    public int maxExponent()
    {
        return BlockFloatingPoint.maxExponent(values, 0, elements);
    }
}
