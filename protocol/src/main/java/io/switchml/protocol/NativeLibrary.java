package io.switchml.protocol;

import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.SymbolLookup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * The project's own shared object, {@code libswitchml_native.so} (sources: {@code protocol/src/main/c}: the packet
 * MAC's vector lanes and the worker's lane kernels; built by the protocol module with clang, freestanding, and carried
 * inside its jar), loaded once per JVM for {@code NativePacketMac} and {@link NativeLanes}.
 * <p>
 * It is copied from the class path to a temporary file, loaded, and the file deleted at once (the mapping stays; a JVM
 * killed later leaves nothing in the temporary directory). When that fails (no such resource for this CPU
 * architecture, no writable temporary directory, a loader error), {@link #lookup()} is null and {@link #problem()}
 * says why; its users then fall back to their Java code.
 */
public final class NativeLibrary
{
    /** The file name inside the jar, under {@code native/linux-<os.arch>/}. */
    public static final String NAME = "libswitchml_native.so";
    private static final SymbolLookup LOOKUP;
    private static final String PROBLEM;
    /** The temporary file the library was loaded from (deleted by then), for a test; null when none was made. */
    public static final Path LOADED_FROM;

    static
    {
        SymbolLookup lookup = null;
        String problem = null;
        Path loadedFrom = null;
        final String resource = "/native/linux-" + System.getProperty("os.arch") + "/" + NAME;
        try (InputStream in = NativeLibrary.class.getResourceAsStream(resource))
        {
            if (in == null)
            {
                problem = resource + " not on the class path (built without clang, or another CPU)";
            }
            else
            {
                final Path file = Files.createTempFile("switchml-", "-" + NAME);
                loadedFrom = file;
                try
                {
                    Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
                    lookup = SymbolLookup.libraryLookup(file, Arena.global());
                }
                finally
                {
                    // mapped once loaded: the file is not needed, and a JVM killed later leaves none behind
                    Files.deleteIfExists(file);
                }
            }
        }
        catch (final Throwable ex)
        {
            lookup = null;
            problem = NAME + " not loaded: " + ex;
        }
        LOOKUP = lookup;
        PROBLEM = problem;
        LOADED_FROM = loadedFrom;
    }

    private NativeLibrary()
    {
    }

    /**
     * @return the loaded library's symbols, or null when it could not be loaded ({@link #problem()}).
     */
    public static SymbolLookup lookup()
    {
        return LOOKUP;
    }

    /**
     * Why a part of the library may not be used: switched off by its system property, or the library not loaded.
     *
     * @param property the part's switch ({@code switchml.mac.native}, {@code switchml.lanes.native}), default true.
     * @return "PROPERTY=false", or {@link #problem()}; null when the part may link its symbols from {@link #lookup()}.
     */
    public static String unavailable(final String property)
    {
        return Boolean.parseBoolean(System.getProperty(property, "true")) ? PROBLEM : property + "=false";
    }

    /**
     * @return why the library is not loaded, or null when it is.
     */
    public static String problem()
    {
        return PROBLEM;
    }
}
