package io.switchml.offload.xdp;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A compiled BPF object (clang -target bpf) opened and loaded with libbpf. Loading captures the verifier's log so
 * that a rejection names the failing instruction instead of only "Permission denied".
 */
public final class BpfObject implements AutoCloseable
{
    /** Verifier log kept per program; the kernel truncates beyond it. */
    private static final int LOG_SIZE = 4 << 20;
    /** Lines of the verifier log quoted in a rejection. */
    private static final int LOG_TAIL_LINES = 40;

    private static final Pattern PROCESSED = Pattern.compile("processed (\\d+) insns");

    private final Path path;
    private final Arena arena = Arena.ofShared();
    private final Map<String, Long> verifiedInstructions = new HashMap<>();
    private MemorySegment object;

    private BpfObject(final Path path, final MemorySegment object)
    {
        this.path = path;
        this.object = object;
    }

    /**
     * Open an object file; nothing is loaded into the kernel yet.
     */
    public static BpfObject open(final Path path) throws BpfException
    {
        Libbpf.ensureAvailable();
        try (Arena call = Arena.ofConfined())
        {
            final MemorySegment state = Libbpf.captureState(call);
            final MemorySegment object = (MemorySegment)Libbpf.OBJECT_OPEN_FILE.invokeExact(state,
                call.allocateFrom(path.toString()), MemorySegment.NULL);
            if (object.address() == 0)
            {
                throw new BpfException("bpf_object__open_file(" + path + "): " + Libbpf.describe(Libbpf.errno(state)));
            }
            return new BpfObject(path, object);
        }
        catch (final BpfException ex)
        {
            throw ex;
        }
        catch (final Throwable ex)
        {
            throw new BpfException("bpf_object__open_file(" + path + ") failed: " + ex, ex);
        }
    }

    /**
     * Open an object shipped on the class path: copied to a temporary file that is deleted as soon as libbpf has
     * opened it (libbpf holds it open until the program is loaded), so that nothing is left behind however the JVM
     * ends.
     */
    public static BpfObject openResource(final String resource) throws BpfException
    {
        final Path file = copyResource(resource);
        try
        {
            return open(file);
        }
        finally
        {
            try
            {
                Files.deleteIfExists(file);
            }
            catch (final IOException ex)
            {
                // a temporary file we cannot delete is not worth failing the load for; it goes at exit
                file.toFile().deleteOnExit();
            }
        }
    }

    /**
     * Copy a classpath resource (an object shipped in a jar) to a temporary file that is deleted at exit, for a caller
     * that hands the file to another program.
     */
    public static Path extractResource(final String resource) throws BpfException
    {
        final Path file = copyResource(resource);
        file.toFile().deleteOnExit();
        return file;
    }

    private static Path copyResource(final String resource) throws BpfException
    {
        try (InputStream in = BpfObject.class.getResourceAsStream(resource))
        {
            if (in == null)
            {
                throw new BpfException("BPF object " + resource + " is not on the class path (was the smartnic-offload module " +
                    "built with clang? see scripts/ensure-test-deps.sh)");
            }
            final Path file = Files.createTempFile("switchml-", "-" + Path.of(resource).getFileName());
            try
            {
                Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
            }
            catch (final IOException ex)
            {
                Files.deleteIfExists(file);
                throw ex;
            }
            return file;
        }
        catch (final IOException ex)
        {
            throw new BpfException("extracting " + resource + " failed: " + ex.getMessage(), ex);
        }
    }

    public Path path()
    {
        return path;
    }

    /**
     * Resize a map before {@link #load()}.
     */
    public void setMaxEntries(final String mapName, final int maxEntries) throws BpfException
    {
        final MemorySegment map = findMap(mapName);
        final int error = invokeInt(() -> (int)Libbpf.MAP_SET_MAX_ENTRIES.invokeExact(map, maxEntries));
        if (error < 0)
        {
            throw new BpfException("bpf_map__set_max_entries(" + mapName + ", " + maxEntries + "): " + Libbpf.describe(error));
        }
    }

    /**
     * Set a map's value size before {@link #load()}: only for a map declared without BTF types (the kernel checks
     * a BTF value type's size against the map's).
     */
    public void setValueSize(final String mapName, final int valueSize) throws BpfException
    {
        final MemorySegment map = findMap(mapName);
        final int error = invokeInt(() -> (int)Libbpf.MAP_SET_VALUE_SIZE.invokeExact(map, valueSize));
        if (error < 0)
        {
            throw new BpfException("bpf_map__set_value_size(" + mapName + ", " + valueSize + "): " + Libbpf.describe(error));
        }
    }

    /**
     * Set a 32-bit read-only global ({@code const volatile} in the program, section .rodata) before {@link #load()}.
     * The verifier then knows it as a constant.
     *
     * @param offset       of the variable in the program's .rodata section.
     * @param expectedSize the section's size: a check that the program declares what the caller thinks it does.
     */
    public void setReadOnlyInt(final long offset, final int value, final long expectedSize) throws BpfException
    {
        final MemorySegment map = findMap(".rodata");
        try (Arena call = Arena.ofConfined())
        {
            final MemorySegment size = call.allocate(ValueLayout.JAVA_LONG);
            final MemorySegment data = (MemorySegment)Libbpf.MAP_INITIAL_VALUE.invokeExact(map, size);
            final long bytes = size.get(ValueLayout.JAVA_LONG, 0);
            if (data.address() == 0 || bytes != expectedSize)
            {
                throw new BpfException(path.getFileName() + ": .rodata holds " + bytes + " bytes, expected " + expectedSize);
            }
            data.reinterpret(bytes).set(ValueLayout.JAVA_INT, offset, value);
        }
        catch (final BpfException ex)
        {
            throw ex;
        }
        catch (final Throwable ex)
        {
            throw new BpfException("bpf_map__initial_value(.rodata) failed: " + ex, ex);
        }
    }

    /**
     * @return the verifier's count of processed instructions for a program loaded by {@link #load}, from its log's
     *     statistics line ("processed N insns (limit 1000000) ..."), or -1 when the log has none.
     */
    public synchronized long verifiedInstructions(final String programName)
    {
        return verifiedInstructions.getOrDefault(programName, -1L);
    }

    /**
     * Load every program and create every map. A verifier rejection throws with the log's last lines.
     *
     * @param programNames the programs whose verifier logs are captured.
     */
    public void load(final String... programNames) throws BpfException
    {
        final MemorySegment[] logs = new MemorySegment[programNames.length];
        for (int i = 0; i < programNames.length; i++)
        {
            final MemorySegment program = findProgram(programNames[i]);
            logs[i] = arena.allocate(LOG_SIZE);
            final MemorySegment log = logs[i];
            invokeInt(() -> (int)Libbpf.PROGRAM_SET_LOG_BUF.invokeExact(program, log, (long)LOG_SIZE));
            invokeInt(() -> (int)Libbpf.PROGRAM_SET_LOG_LEVEL.invokeExact(program, 1));
        }
        final MemorySegment object = this.object;
        final int error = invokeInt(() -> (int)Libbpf.OBJECT_LOAD.invokeExact(object));
        if (error < 0)
        {
            final StringBuilder message = new StringBuilder("loading " + path.getFileName() + " failed: " + Libbpf.describe(error));
            for (int i = 0; i < programNames.length; i++)
            {
                final String text = logs[i].getString(0, StandardCharsets.UTF_8);
                if (!text.isBlank())
                {
                    message.append("\nverifier log of ").append(programNames[i]).append(" (last lines):\n").append(tail(text));
                }
            }
            throw new BpfException(message.toString());
        }
        for (int i = 0; i < programNames.length; i++)
        {
            final Matcher matcher = PROCESSED.matcher(logs[i].getString(0, StandardCharsets.UTF_8));
            long processed = -1;
            while (matcher.find())
            {
                processed = Long.parseLong(matcher.group(1));
            }
            synchronized (this)
            {
                verifiedInstructions.put(programNames[i], processed);
            }
        }
    }

    /**
     * @return the verifier's statistics line ("processed N insns ...") of a loaded program, or null.
     */
    static String tail(final String log)
    {
        final List<String> lines = Arrays.asList(log.strip().split("\n"));
        return String.join("\n", lines.subList(Math.max(0, lines.size() - LOG_TAIL_LINES), lines.size()));
    }

    /**
     * @return the file descriptor of a loaded program.
     */
    public int programFd(final String name) throws BpfException
    {
        final MemorySegment program = findProgram(name);
        final int fd = invokeInt(() -> (int)Libbpf.PROGRAM_FD.invokeExact(program));
        if (fd < 0)
        {
            throw new BpfException("program " + name + " in " + path.getFileName() + " is not loaded: " + Libbpf.describe(fd));
        }
        return fd;
    }

    /**
     * @return a loaded map by name.
     */
    public BpfMap map(final String name) throws BpfException
    {
        final MemorySegment map = findMap(name);
        final int fd = invokeInt(() -> (int)Libbpf.MAP_FD.invokeExact(map));
        if (fd < 0)
        {
            throw new BpfException("map " + name + " in " + path.getFileName() + " is not created: " + Libbpf.describe(fd));
        }
        final int keySize = invokeInt(() -> (int)Libbpf.MAP_KEY_SIZE.invokeExact(map));
        final int valueSize = invokeInt(() -> (int)Libbpf.MAP_VALUE_SIZE.invokeExact(map));
        return new BpfMap(name, fd, keySize, valueSize);
    }

    private MemorySegment findProgram(final String name) throws BpfException
    {
        final MemorySegment object = object();
        try (Arena call = Arena.ofConfined())
        {
            final MemorySegment program = (MemorySegment)Libbpf.FIND_PROGRAM.invokeExact(object, call.allocateFrom(name));
            if (program.address() == 0)
            {
                throw new BpfException("no program '" + name + "' in " + path.getFileName());
            }
            return program;
        }
        catch (final BpfException ex)
        {
            throw ex;
        }
        catch (final Throwable ex)
        {
            throw new BpfException("bpf_object__find_program_by_name(" + name + ") failed: " + ex, ex);
        }
    }

    private MemorySegment findMap(final String name) throws BpfException
    {
        final MemorySegment object = object();
        try (Arena call = Arena.ofConfined())
        {
            final MemorySegment map = (MemorySegment)Libbpf.FIND_MAP.invokeExact(object, call.allocateFrom(name));
            if (map.address() == 0)
            {
                throw new BpfException("no map '" + name + "' in " + path.getFileName());
            }
            return map;
        }
        catch (final BpfException ex)
        {
            throw ex;
        }
        catch (final Throwable ex)
        {
            throw new BpfException("bpf_object__find_map_by_name(" + name + ") failed: " + ex, ex);
        }
    }

    private synchronized MemorySegment object() throws BpfException
    {
        if (object == null)
        {
            throw new BpfException(path.getFileName() + " is closed");
        }
        return object;
    }

    interface IntCall
    {
        int call() throws Throwable;
    }

    static int invokeInt(final IntCall call) throws BpfException
    {
        try
        {
            return call.call();
        }
        catch (final Throwable ex)
        {
            throw new BpfException("libbpf call failed: " + ex, ex);
        }
    }

    /**
     * Unload the programs and maps (an attached program stays attached until detached: the kernel holds it).
     */
    public synchronized void close()
    {
        if (object != null)
        {
            try
            {
                Libbpf.OBJECT_CLOSE.invokeExact(object);
            }
            catch (final Throwable ignore)
            {
                // closing anyway
            }
            object = null;
            arena.close();
        }
    }
}
