package io.switchml.offload.xdp;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The system libbpf ({@code libbpf.so.1}, Debian's libbpf1) through the foreign function API: the dozen calls the
 * XDP backend needs to open, load and attach a program, use its maps and run it on test packets. Written here
 * because no maintained Java binding of libbpf is on Maven Central (hello-ebpf is not), and JNI would need C glue
 * built per platform; these are plain C calls with ints and pointers.
 * <p>
 * libbpf 1.x returns a negative errno from int functions and NULL (with errno set) from pointer functions; callers
 * turn both into a {@link BpfException} with {@link #describe}.
 */
final class Libbpf
{
    static final int BPF_ANY = 0;
    static final int BPF_NOEXIST = 1;
    static final int BPF_EXIST = 2;
    static final int BPF_F_LOCK = 4;

    static final int XDP_FLAGS_UPDATE_IF_NOEXIST = 1;
    static final int XDP_FLAGS_SKB_MODE = 2;
    static final int XDP_FLAGS_DRV_MODE = 4;

    /** struct bpf_test_run_opts of libbpf 1.1 (80 bytes). */
    static final long TEST_RUN_OPTS_SIZE = 80;
    static final long TEST_RUN_DATA_IN = 8;
    static final long TEST_RUN_DATA_OUT = 16;
    static final long TEST_RUN_DATA_SIZE_IN = 24;
    static final long TEST_RUN_DATA_SIZE_OUT = 28;
    static final long TEST_RUN_RETVAL = 56;
    static final long TEST_RUN_REPEAT = 60;
    static final long TEST_RUN_DURATION = 64;

    /** struct bpf_prog_info: id at 4, name[16] at 64; we read the first 80 bytes. */
    static final int PROG_INFO_SIZE = 80;
    static final long PROG_INFO_ID = 4;
    static final long PROG_INFO_NAME = 64;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MemoryLayout CAPTURE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final SymbolLookup LIBBPF;
    private static final String LOAD_ERROR;

    static
    {
        SymbolLookup lookup = null;
        String error = null;
        try
        {
            lookup = SymbolLookup.libraryLookup("libbpf.so.1", Arena.global());
        }
        catch (final IllegalArgumentException ex)
        {
            error = "libbpf.so.1 not found: install Debian's libbpf1 (" + ex.getMessage() + ")";
        }
        LIBBPF = lookup;
        LOAD_ERROR = error;
    }

    static final MethodHandle OBJECT_OPEN_FILE = errnoCall("bpf_object__open_file", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
    static final MethodHandle OBJECT_LOAD = call("bpf_object__load", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle OBJECT_CLOSE = call("bpf_object__close", FunctionDescriptor.ofVoid(ADDRESS));
    static final MethodHandle FIND_PROGRAM = call("bpf_object__find_program_by_name", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
    static final MethodHandle PROGRAM_FD = call("bpf_program__fd", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle PROGRAM_SET_LOG_BUF = call("bpf_program__set_log_buf", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG));
    static final MethodHandle PROGRAM_SET_LOG_LEVEL = call("bpf_program__set_log_level", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    static final MethodHandle FIND_MAP = call("bpf_object__find_map_by_name", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
    static final MethodHandle MAP_FD = call("bpf_map__fd", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle MAP_SET_MAX_ENTRIES = call("bpf_map__set_max_entries", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    static final MethodHandle MAP_SET_VALUE_SIZE = call("bpf_map__set_value_size", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    static final MethodHandle MAP_INITIAL_VALUE = call("bpf_map__initial_value", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
    static final MethodHandle MAP_KEY_SIZE = call("bpf_map__key_size", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle MAP_VALUE_SIZE = call("bpf_map__value_size", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle MAP_UPDATE = call("bpf_map_update_elem", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG));
    static final MethodHandle MAP_LOOKUP_FLAGS = call("bpf_map_lookup_elem_flags",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG));
    static final MethodHandle MAP_DELETE = call("bpf_map_delete_elem", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    static final MethodHandle XDP_ATTACH = call("bpf_xdp_attach", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    static final MethodHandle XDP_DETACH = call("bpf_xdp_detach", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    static final MethodHandle XDP_QUERY_ID = call("bpf_xdp_query_id", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    static final MethodHandle PROG_GET_FD_BY_ID = call("bpf_prog_get_fd_by_id", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    static final MethodHandle OBJ_GET_INFO_BY_FD = call("bpf_obj_get_info_by_fd", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    static final MethodHandle PROG_TEST_RUN = call("bpf_prog_test_run_opts", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS));
    static final MethodHandle NUM_POSSIBLE_CPUS = call("libbpf_num_possible_cpus", FunctionDescriptor.of(JAVA_INT));
    static final MethodHandle IF_NAMETOINDEX = libc("if_nametoindex", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle CLOSE = libc("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    static final MethodHandle STRERROR = libc("strerror", FunctionDescriptor.of(ADDRESS, JAVA_INT));

    private Libbpf()
    {
    }

    /**
     * @throws BpfException when libbpf.so.1 could not be loaded, naming the package to install.
     */
    static void ensureAvailable() throws BpfException
    {
        if (LOAD_ERROR != null)
        {
            throw new BpfException(LOAD_ERROR);
        }
    }

    /**
     * @return a downcall handle of libbpf's {@code name} (tests bind calls the backend does not make through it), null
     * when libbpf is not there.
     */
    static MethodHandle call(final String name, final FunctionDescriptor descriptor)
    {
        if (LIBBPF == null)
        {
            return null;
        }
        return LIBBPF.find(name).map(symbol -> LINKER.downcallHandle(symbol, descriptor))
            .orElseThrow(() -> new IllegalStateException("libbpf.so.1 lacks " + name + " (libbpf 1.0 or newer is needed)"));
    }

    private static MethodHandle errnoCall(final String name, final FunctionDescriptor descriptor)
    {
        if (LIBBPF == null)
        {
            return null;
        }
        return LIBBPF.find(name).map(symbol -> LINKER.downcallHandle(symbol, descriptor,
                Linker.Option.captureCallState("errno")))
            .orElseThrow(() -> new IllegalStateException("libbpf.so.1 lacks " + name));
    }

    private static MethodHandle libc(final String name, final FunctionDescriptor descriptor)
    {
        return LINKER.defaultLookup().find(name).map(symbol -> LINKER.downcallHandle(symbol, descriptor))
            .orElseThrow(() -> new IllegalStateException("libc lacks " + name));
    }

    /**
     * @return a buffer for {@link #errnoCall} handles' captured state.
     */
    static MemorySegment captureState(final Arena arena)
    {
        return arena.allocate(CAPTURE);
    }

    static int errno(final MemorySegment state)
    {
        return (int)ERRNO.get(state, 0L);
    }

    /**
     * @param error a positive or negative errno.
     * @return strerror's text and the number, e.g. "Operation not supported (errno 95)".
     */
    static String describe(final int error)
    {
        final int errno = Math.abs(error);
        try
        {
            final MemorySegment text = (MemorySegment)STRERROR.invokeExact(errno);
            return text.reinterpret(256).getString(0) + " (errno " + errno + ")";
        }
        catch (final Throwable ex)
        {
            return "errno " + errno;
        }
    }

    /**
     * @return whether this network namespace has an interface of that name now.
     */
    static boolean interfaceExists(final String name) throws BpfException
    {
        return nameToIndex(name) != 0;
    }

    static int ifindex(final String name) throws BpfException
    {
        final int index = nameToIndex(name);
        if (index == 0)
        {
            throw new BpfException("no network interface '" + name + "' in this network namespace");
        }
        return index;
    }

    /** @return the interface's index, 0 when there is none of that name. */
    private static int nameToIndex(final String name) throws BpfException
    {
        try (Arena arena = Arena.ofConfined())
        {
            return (int)IF_NAMETOINDEX.invokeExact(arena.allocateFrom(name));
        }
        catch (final Throwable ex)
        {
            throw new BpfException("if_nametoindex(" + name + ") failed: " + ex, ex);
        }
    }

    static void closeFd(final int fd)
    {
        try
        {
            final int ignored = (int)CLOSE.invokeExact(fd);
        }
        catch (final Throwable ignore)
        {
            // nothing to do
        }
    }

    static int possibleCpus() throws BpfException
    {
        try
        {
            final int cpus = (int)NUM_POSSIBLE_CPUS.invokeExact();
            if (cpus <= 0)
            {
                throw new BpfException("libbpf_num_possible_cpus: " + describe(cpus));
            }
            return cpus;
        }
        catch (final BpfException ex)
        {
            throw ex;
        }
        catch (final Throwable ex)
        {
            throw new BpfException("libbpf_num_possible_cpus failed: " + ex, ex);
        }
    }

    static final ValueLayout.OfInt INT = JAVA_INT;
}
