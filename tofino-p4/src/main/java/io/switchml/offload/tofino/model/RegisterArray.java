package io.switchml.offload.tofino.model;

/**
 * One register array of the pipeline, as Tofino has them: a fixed number of 32-bit cells (or pairs of 32-bit
 * halves that one stateful ALU reads and writes together), sized as declared in the P4 program, reached from the
 * data plane only through {@link #execute}, at most once per packet per pass: a second access in the same pass
 * throws, because the hardware cannot do it (a register lives in one stage, and a packet passes a stage once).
 * <p>
 * The control plane reads and writes cells without that limit, as P4Runtime does between packets.
 */
final class RegisterArray
{
    /**
     * A RegisterAction: computes the new cell value from the old one (and values the packet carries) and returns
     * what the action outputs. 32-bit integer arithmetic only.
     */
    interface Action
    {
        /**
         * @param cell the cell's halves, {@code cell[0]} = lo, {@code cell[1]} = hi (unused for a single register);
         *             updated in place.
         * @return the action's output.
         */
        int apply(int[] cell);
    }

    private final String name;
    private final int size;
    private final boolean pair;
    private final int[] lo;
    private final int[] hi;
    private final int[] cell = new int[2];
    private long accessedInPass = -1;

    RegisterArray(final P4Names.Register register)
    {
        this.name = register.name();
        this.size = register.size();
        this.pair = register.pair();
        this.lo = new int[size];
        this.hi = pair ? new int[size] : null;
    }

    String name()
    {
        return name;
    }

    int size()
    {
        return size;
    }

    boolean pair()
    {
        return pair;
    }

    /**
     * The data plane's one access to this register in a pass.
     *
     * @param pass   the pipeline pass's serial number (a new one per packet and per recirculation).
     * @param index  the cell.
     * @param action what the stateful ALU does.
     * @return the action's output.
     * @throws IllegalStateException on a second access in the same pass, or an index out of range (both are
     *                               programming errors of the model: the P4 program cannot express them).
     */
    int execute(final long pass, final int index, final Action action)
    {
        if (accessedInPass == pass)
        {
            throw new IllegalStateException("register " + name + " accessed twice in one pass: Tofino allows one access per packet");
        }
        if (index < 0 || index >= size)
        {
            throw new IllegalStateException("register " + name + " index " + index + " outside its " + size + " cells");
        }
        accessedInPass = pass;
        cell[0] = lo[index];
        cell[1] = pair ? hi[index] : 0;
        final int output = action.apply(cell);
        lo[index] = cell[0];
        if (pair)
        {
            hi[index] = cell[1];
        }
        return output;
    }

    /**
     * @return the cell as the control plane reads it: lo, or hi:lo as 64 bits for a pair.
     */
    long read(final int index)
    {
        return pair ? ((long)hi[index] << 32) | (lo[index] & 0xFFFF_FFFFL) : lo[index] & 0xFFFF_FFFFL;
    }

    void write(final int index, final long value)
    {
        lo[index] = (int)value;
        if (pair)
        {
            hi[index] = (int)(value >>> 32);
        }
    }
}
