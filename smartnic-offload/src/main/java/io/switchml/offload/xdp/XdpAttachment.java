package io.switchml.offload.xdp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * An XDP program attached to a network interface in driver (native) mode. Attaching first looks at what is there: a
 * program of our name left by an appliance that was killed is detached and replaced (and said so in the log); anyone
 * else's program is never evicted. Reading an attached program's name takes BPF_PROG_GET_FD_BY_ID, which the kernel
 * allows only with CAP_SYS_ADMIN; the systemd unit grants CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN, so there the name
 * is unknown and a stale program is recognised by its id instead, which the earlier appliance recorded (ids are
 * allocated cyclically, so another program does not get it again). Detached on {@link #close()} and, through a
 * shutdown hook, on normal exit and SIGTERM; after kill -9 the kernel keeps the program attached until the next
 * start replaces it. {@link #reattach} puts the same program back on the interface after someone took it off, or
 * after the interface was deleted and created again (a new ifindex), but never in place of another program.
 */
public final class XdpAttachment implements AutoCloseable
{
    /**
     * A program attached to an interface.
     *
     * @param id   the kernel's program id.
     * @param name the program's name (at most 15 characters), or null when this process may not read it (no
     *             CAP_SYS_ADMIN).
     * @param mode {@link XdpMode#NATIVE} or {@link XdpMode#GENERIC}.
     */
    public record AttachedProgram(int id, String name, XdpMode mode)
    {
        /**
         * @return the name, or a note that it could not be read, for messages.
         */
        public String describeName()
        {
            return name != null ? name : "name unreadable without CAP_SYS_ADMIN";
        }
    }

    private final String interfaceName;
    private final int programId;
    private final Thread shutdownHook;
    private boolean detached;

    private XdpAttachment(final String interfaceName, final int programId)
    {
        this.interfaceName = interfaceName;
        this.programId = programId;
        this.shutdownHook = new Thread(this::detachQuietly, "switchml-xdp-detach");
        Runtime.getRuntime().addShutdownHook(shutdownHook);
    }

    /**
     * Attach a loaded program.
     *
     * @param interfaceName   the interface, in this process's network namespace.
     * @param programFd       the loaded program.
     * @param ourProgramName  the name our programs carry: one attached already is stale and gets replaced.
     * @param recordedId      the id an earlier appliance recorded for the program it attached here, or 0: a program
     *                        of that id whose name cannot be read is ours and stale, and gets replaced.
     * @param log             receives one line per notable event (a stale program replaced).
     * @return the attachment.
     * @throws BpfException naming the interface and the kernel's reason, or the foreign program in the way.
     */
    public static XdpAttachment attach(
        final String interfaceName, final int programFd, final String ourProgramName,
        final int recordedId, final Consumer<String> log) throws BpfException
    {
        Libbpf.ensureAvailable();
        final int ifindex = Libbpf.ifindex(interfaceName);
        final Optional<AttachedProgram> existing = query(interfaceName);
        if (existing.isPresent())
        {
            final AttachedProgram program = existing.get();
            final String attachedMode = program.mode().name().toLowerCase(Locale.ROOT);
            if (program.name() == null && (recordedId == 0 || program.id() != recordedId))
            {
                throw new BpfException(interfaceName + " already has XDP program id " + program.id() + " attached in " +
                    attachedMode + " mode, whose name this process may not read (BPF_PROG_GET_FD_BY_ID needs CAP_SYS_ADMIN) " +
                    "and which is not the one an earlier appliance recorded (" + (recordedId == 0 ? "none recorded" :
                    "id " + recordedId) + "); not replacing it (a stale switchml program left by a version that did not " +
                    "record it: ip link set dev " + interfaceName + " xdp off)");
            }
            if (program.name() != null && !program.name().equals(ourProgramName))
            {
                throw new BpfException(interfaceName + " already has XDP program id " + program.id() + " (" + program.name() +
                    ") attached in " + attachedMode + " mode; not ours, not replacing it");
            }
            detach(ifindex, interfaceName, program.mode());
            log.accept("xdp: replaced stale XDP program id " + program.id() + " (" + (program.name() != null ? program.name() :
                "recorded as ours; its name is unreadable without CAP_SYS_ADMIN") + ") on " + interfaceName +
                " left by an earlier appliance");
        }

        attachIfNone(ifindex, interfaceName, programFd);
        final int id = query(interfaceName).map(AttachedProgram::id).orElse(0);
        return new XdpAttachment(interfaceName, id);
    }

    /**
     * Attach the program again after it was taken off the interface: detached by someone, replaced by a program that
     * is gone again, or lost with an interface that was deleted and created again under the same name (its ifindex is
     * looked up afresh). Never in place of another program: the kernel is asked to attach only if the interface has
     * none ({@code XDP_FLAGS_UPDATE_IF_NOEXIST}), so one attached in the meantime makes this fail, not vanish.
     * Synchronized with the detach of {@link #close()} and the shutdown hook: once those ran it attaches nothing.
     *
     * @param programFd the loaded program: the one this attachment was made with, so its id stays the same.
     * @throws BpfException naming the interface and the kernel's reason ("Device or resource busy": a program is there).
     */
    public synchronized void reattach(final int programFd) throws BpfException
    {
        if (detached)
        {
            throw new BpfException("not re-attaching to " + interfaceName + ": the attachment was closed");
        }
        attachIfNone(Libbpf.ifindex(interfaceName), interfaceName, programFd);
    }

    /**
     * Attach in driver mode only if the interface has no XDP program ({@code XDP_FLAGS_UPDATE_IF_NOEXIST}): one
     * attached by someone else in the meantime makes this fail ("Device or resource busy"), not vanish.
     */
    private static void attachIfNone(final int ifindex, final String interfaceName, final int programFd) throws BpfException
    {
        final int error = BpfObject.invokeInt(() -> (int)Libbpf.XDP_ATTACH.invokeExact(
            ifindex, programFd, flags(XdpMode.NATIVE) | Libbpf.XDP_FLAGS_UPDATE_IF_NOEXIST, MemorySegment.NULL));
        if (error < 0)
        {
            throw new BpfException("bpf_xdp_attach(" + interfaceName + ", native, only if none): " + Libbpf.describe(error) +
                " (a program attached meanwhile; or the driver has no native XDP, or no multi-buffer XDP at " +
                interfaceName + "'s MTU)");
        }
    }

    private static int flags(final XdpMode mode)
    {
        return mode == XdpMode.GENERIC ? Libbpf.XDP_FLAGS_SKB_MODE : Libbpf.XDP_FLAGS_DRV_MODE;
    }

    private static void detach(final int ifindex, final String interfaceName, final XdpMode mode) throws BpfException
    {
        final int flags = flags(mode);
        final int error = BpfObject.invokeInt(() -> (int)Libbpf.XDP_DETACH.invokeExact(ifindex, flags, MemorySegment.NULL));
        if (error < 0)
        {
            throw new BpfException("bpf_xdp_detach(" + interfaceName + "): " + Libbpf.describe(error));
        }
    }

    /**
     * @return the XDP program attached to an interface in driver or generic mode, if any.
     */
    public static Optional<AttachedProgram> query(final String interfaceName) throws BpfException
    {
        Libbpf.ensureAvailable();
        final int ifindex = Libbpf.ifindex(interfaceName);
        for (final XdpMode mode : new XdpMode[] {XdpMode.NATIVE, XdpMode.GENERIC})
        {
            final int flags = flags(mode);
            try (Arena arena = Arena.ofConfined())
            {
                final MemorySegment id = arena.allocate(ValueLayout.JAVA_INT);
                final int error = BpfObject.invokeInt(() -> (int)Libbpf.XDP_QUERY_ID.invokeExact(ifindex, flags, id));
                if (error < 0)
                {
                    throw new BpfException("bpf_xdp_query_id(" + interfaceName + "): " + Libbpf.describe(error));
                }
                final int programId = id.get(ValueLayout.JAVA_INT, 0);
                if (programId != 0)
                {
                    return Optional.of(new AttachedProgram(programId, programName(programId), mode));
                }
            }
        }
        return Optional.empty();
    }

    private static String programName(final int programId) throws BpfException
    {
        final int fd = BpfObject.invokeInt(() -> (int)Libbpf.PROG_GET_FD_BY_ID.invokeExact(programId));
        if (fd < 0)
        {
            return null; // EPERM without CAP_SYS_ADMIN
        }
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment info = arena.allocate(Libbpf.PROG_INFO_SIZE, 8);
            final MemorySegment length = arena.allocate(ValueLayout.JAVA_INT);
            length.set(ValueLayout.JAVA_INT, 0, Libbpf.PROG_INFO_SIZE);
            final int error = BpfObject.invokeInt(() -> (int)Libbpf.OBJ_GET_INFO_BY_FD.invokeExact(fd, info, length));
            if (error < 0)
            {
                return null;
            }
            return info.asSlice(Libbpf.PROG_INFO_NAME, 16).getString(0, StandardCharsets.US_ASCII);
        }
        finally
        {
            Libbpf.closeFd(fd);
        }
    }

    public String interfaceName()
    {
        return interfaceName;
    }

    public int programId()
    {
        return programId;
    }

    /**
     * @return whether this attachment detached (or is detaching) its program: closed, or the JVM is shutting down.
     */
    public synchronized boolean isDetached()
    {
        return detached;
    }

    private synchronized void detachQuietly()
    {
        if (detached)
        {
            return;
        }
        detached = true;
        try
        {
            if (Libbpf.interfaceExists(interfaceName))  // gone: nothing of ours is attached anywhere
            {
                final Optional<AttachedProgram> attached = query(interfaceName);
                if (attached.isPresent() && attached.get().id() == programId)
                {
                    detach(Libbpf.ifindex(interfaceName), interfaceName, XdpMode.NATIVE);
                }
            }
        }
        catch (final BpfException ex)
        {
            System.err.println("xdp: detaching from " + interfaceName + " failed: " + ex.getMessage());
        }
    }

    /**
     * Detach the program if it is still the one we attached. Idempotent.
     */
    public void close()
    {
        detachQuietly();
        try
        {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        }
        catch (final IllegalStateException ignore)
        {
            // already shutting down: the hook is running or ran
        }
    }
}
