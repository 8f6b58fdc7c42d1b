package io.switchml.bench.jmh;

import io.switchml.appliance.engine.SlotPool;
import io.switchml.protocol.DataHeaderFlyweight;
import io.switchml.protocol.DropReason;
import io.switchml.protocol.ElementType;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;

/**
 * The appliance's aggregation of one update packet ({@link SlotPool#onUpdate}, Algorithm 3) in steady state: n
 * workers stream chunks through s slots in order, each slot reuse flips the pool version, so n - 1 of every n
 * updates are absorbed and one completes the slot and writes the result packet. One operation is one update,
 * including setting the packet's slot, flags and chunk sequence; bytes per operation are the 4 * k payload bytes.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsPrepend = {JvmFlags.ADD_EXPORTS, JvmFlags.NATIVE_ACCESS, JvmFlags.UNSAFE_MEMORY_ACCESS})
public class SlotPoolBenchmark
{
    @Param({"256", "8192"})
    public int k;

    @Param({"4"})
    public int workers;

    @Param({"32"})
    public int slots;

    SlotPool pool;
    DataHeaderFlyweight[] updates;
    UnsafeBuffer result;
    int nextRank;
    int nextSlot;
    int nextVersion;
    long nextChunk;
    long unexpected;

    @Setup(Level.Trial)
    public void setup()
    {
        pool = new SlotPool(workers, slots, k);
        updates = new DataHeaderFlyweight[workers];
        final int length = DataHeaderFlyweight.packetLength(k);
        for (int rank = 0; rank < workers; rank++)
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
            buffer.putBytes(DataHeaderFlyweight.PAYLOAD_OFFSET, Chunks.randomBytes(length - DataHeaderFlyweight.PAYLOAD_OFFSET, rank));
            updates[rank] = new DataHeaderFlyweight().wrap(buffer, 0).writeHeader(DataHeaderFlyweight.TYPE_UPDATE, 1, rank, 0,
                ElementType.INT32, 0, 0, k, DataHeaderFlyweight.NO_EXPONENT, DataHeaderFlyweight.NO_EXPONENT);
            if (DataHeaderFlyweight.validate(buffer, 0, length) != DropReason.NONE)
            {
                throw new IllegalStateException("update packet does not validate");
            }
        }
        result = new UnsafeBuffer(ByteBuffer.allocateDirect(length));
        checkOneRound();
    }

    /** Aggregate the first round of every slot outside the measurement and check the outcomes and the sums. */
    private void checkOneRound()
    {
        for (int chunk = 0; chunk < slots; chunk++)
        {
            for (int sender = 0; sender < workers; sender++)
            {
                final int outcome = onUpdate();
                final int expected = sender == workers - 1 ? SlotPool.COMPLETED : SlotPool.ABSORBED;
                if (outcome != expected)
                {
                    throw new IllegalStateException("update of rank " + sender + " chunk " + chunk + " returned " + outcome);
                }
            }
            for (int lane = 0; lane < k; lane++)
            {
                int sum = 0;
                for (int sender = 0; sender < workers; sender++)
                {
                    sum += updates[sender].lane(lane);
                }
                if (result.getInt(DataHeaderFlyweight.PAYLOAD_OFFSET + lane * 4, ByteOrder.BIG_ENDIAN) != sum)
                {
                    throw new IllegalStateException("wrong sum in lane " + lane + " of chunk " + chunk);
                }
            }
        }
        unexpected = 0;
    }

    @TearDown(Level.Iteration)
    public void checkOutcomes()
    {
        if (unexpected != 0)
        {
            throw new IllegalStateException(unexpected + " updates were neither absorbed nor completed");
        }
    }

    @Benchmark
    public int onUpdate()
    {
        final DataHeaderFlyweight update = updates[nextRank];
        update.slotIndex(nextSlot).flags(nextVersion);
        update.buffer().putLong(update.offset() + DataHeaderFlyweight.CHUNK_SEQUENCE_OFFSET, nextChunk, ByteOrder.BIG_ENDIAN);
        final int outcome = pool.onUpdate(update, result, 0, 0L);
        if (outcome > SlotPool.COMPLETED)
        {
            unexpected++;
        }
        if (++nextRank == workers)
        {
            nextRank = 0;
            nextChunk++;
            if (++nextSlot == slots)
            {
                nextSlot = 0;
                nextVersion ^= 1;
            }
        }
        return outcome;
    }
}
