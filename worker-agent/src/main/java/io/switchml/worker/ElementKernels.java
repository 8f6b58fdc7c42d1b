package io.switchml.worker;

import io.switchml.protocol.NativeLanes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where a worker JVM's per-element work runs, for its start-up report: the native lane kernels ({@link NativeLanes})
 * or the Java loops, and whether the JIT stops at C1. The launcher (packaging/bin/switchml) starts worker commands
 * with {@code -XX:TieredStopAtLevel=1 -Dswitchml.jit=quick} by default on x86-64 ({@code SWITCHML_WORKER_JIT}): with the
 * per-element loops in native code, what is left in Java is per packet, and C1's code for it is as fast as C2's while C2
 * itself no longer takes a core from the job's first all-reduces. The Java loops need C2: a JVM that has them at C1
 * says so once, loudly, naming the setting that brings C2 back.
 */
public final class ElementKernels
{
    private static final Logger LOG = LoggerFactory.getLogger(ElementKernels.class);
    private static final boolean QUICK_JIT = "quick".equals(System.getProperty("switchml.jit"));
    private static volatile boolean warned;

    private ElementKernels()
    {
    }

    /**
     * @return e.g. "lane kernels AVX-512, JIT C1 only", or the reason the Java loops are used.
     */
    public static String description()
    {
        return "lane kernels " + NativeLanes.description() + (QUICK_JIT ? ", JIT C1 only" : "");
    }

    /**
     * Logs a warning, once per JVM, when the Java loops run in a JVM whose JIT stops at C1.
     */
    public static void warnIfSlow()
    {
        if (QUICK_JIT && !NativeLanes.enabled() && !warned)
        {
            warned = true;
            LOG.warn("the native lane kernels are not in use ({}) and this JVM compiles with C1 only " +
                "(SWITCHML_WORKER_JIT=quick, the launcher's default): float all-reduces run the Java loops in C1's " +
                "code, many times slower; start the worker with SWITCHML_WORKER_JIT=full", NativeLanes.description());
        }
    }
}
