package io.switchml.offload.xdp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * A BPF map by file descriptor: update, lookup (optionally under the value's bpf_spin_lock with BPF_F_LOCK),
 * delete, and sums over the CPUs of a per-CPU array. Keys and values are native-memory segments laid out as the
 * program declares them. Control threads only; the per-CPU scratch buffer is guarded by this object's lock.
 */
public final class BpfMap
{
    private static final int ENOENT = 2;

    private final String name;
    private final int fd;
    private final int keySize;
    private final int valueSize;
    private MemorySegment perCpu;
    private int cpus;

    BpfMap(final String name, final int fd, final int keySize, final int valueSize)
    {
        this.name = name;
        this.fd = fd;
        this.keySize = keySize;
        this.valueSize = valueSize;
    }

    public String name()
    {
        return name;
    }

    public int fd()
    {
        return fd;
    }

    public int keySize()
    {
        return keySize;
    }

    public int valueSize()
    {
        return valueSize;
    }

    /**
     * @param flags {@link Libbpf#BPF_ANY}, BPF_NOEXIST, BPF_EXIST, optionally with BPF_F_LOCK.
     */
    public void update(final MemorySegment key, final MemorySegment value, final long flags) throws BpfException
    {
        final int error = BpfObject.invokeInt(() -> (int)Libbpf.MAP_UPDATE.invokeExact(fd, key, value, flags));
        if (error < 0)
        {
            throw new BpfException("bpf_map_update_elem(" + name + "): " + Libbpf.describe(error));
        }
    }

    /**
     * @return false when the key is absent.
     */
    public boolean lookup(final MemorySegment key, final MemorySegment value) throws BpfException
    {
        return lookup(key, value, 0);
    }

    /**
     * @param flags 0, or BPF_F_LOCK to copy the value under its spin lock.
     * @return false when the key is absent.
     */
    public boolean lookup(final MemorySegment key, final MemorySegment value, final long flags) throws BpfException
    {
        final int error = BpfObject.invokeInt(() -> (int)Libbpf.MAP_LOOKUP_FLAGS.invokeExact(fd, key, value, flags));
        if (error == -ENOENT)
        {
            return false;
        }
        if (error < 0)
        {
            throw new BpfException("bpf_map_lookup_elem(" + name + "): " + Libbpf.describe(error));
        }
        return true;
    }

    /**
     * @return false when the key was absent.
     */
    public boolean delete(final MemorySegment key) throws BpfException
    {
        final int error = BpfObject.invokeInt(() -> (int)Libbpf.MAP_DELETE.invokeExact(fd, key));
        if (error == -ENOENT)
        {
            return false;
        }
        if (error < 0)
        {
            throw new BpfException("bpf_map_delete_elem(" + name + "): " + Libbpf.describe(error));
        }
        return true;
    }

    /**
     * Read entries 0 .. count-1 of a per-CPU array of u64 and sum each over the possible CPUs.
     */
    public synchronized long[] sumPerCpu(final int count) throws BpfException
    {
        if (perCpu == null)
        {
            cpus = Libbpf.possibleCpus();
            perCpu = Arena.ofAuto().allocate(8L * cpus + 8, 8);
        }
        final long[] sums = new long[count];
        for (int index = 0; index < count; index++)
        {
            perCpu.set(ValueLayout.JAVA_INT, 8L * cpus, index);
            if (!lookup(perCpu.asSlice(8L * cpus, 4), perCpu.asSlice(0, 8L * cpus)))
            {
                throw new BpfException("per-CPU map " + name + " has no entry " + index);
            }
            long sum = 0;
            for (int cpu = 0; cpu < cpus; cpu++)
            {
                sum += perCpu.get(ValueLayout.JAVA_LONG, 8L * cpu);
            }
            sums[index] = sum;
        }
        return sums;
    }
}
