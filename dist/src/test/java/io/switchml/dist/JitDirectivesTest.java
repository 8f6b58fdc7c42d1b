package io.switchml.dist;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The JIT directives the launcher gives the data-path commands (packaging/lib/jit-directives.json): HotSpot reads
 * every directive of the file, and every method the file keeps from being inlined exists under that name, so that a
 * renamed method cannot leave a directive that silently matches nothing.
 */
class JitDirectivesTest
{
    private static final Path FILE = Path.of("..", "packaging", "lib", "jit-directives.json");
    /** A quoted "-package/Class.method" (or "+..."): an inline rule naming one method. */
    private static final Pattern INLINE_RULE = Pattern.compile("\"[-+]([A-Za-z0-9_/$]+)\\.([A-Za-z0-9_$]+)\"");

    private static String withoutComments() throws IOException
    {
        final StringBuilder text = new StringBuilder();
        for (final String line : Files.readAllLines(FILE, StandardCharsets.UTF_8))
        {
            final int comment = line.indexOf("//");
            text.append(comment >= 0 ? line.substring(0, comment) : line).append('\n');
        }
        return text.toString();
    }

    @Test
    void everyMethodKeptFromInliningExists() throws Exception
    {
        final Matcher rule = INLINE_RULE.matcher(withoutComments());
        final List<String> named = new ArrayList<>();
        while (rule.find())
        {
            final String className = rule.group(1).replace('/', '.');
            final String methodName = rule.group(2);
            final Class<?> type = Class.forName(className, false, getClass().getClassLoader());
            assertTrue(Arrays.stream(type.getDeclaredMethods()).map(Method::getName).anyMatch(methodName::equals),
                FILE + " names " + className + "." + methodName + ", which does not exist");
            named.add(className + "." + methodName);
        }
        assertTrue(named.size() >= 10, "inline rules found in " + FILE + ": " + named);
    }

    @Test
    void hotSpotReadsEveryDirective() throws Exception
    {
        final String text = withoutComments();
        final int directives = text.split("match:", -1).length - 1;
        final Process java = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-XX:+UnlockDiagnosticVMOptions", "-XX:CompilerDirectivesFile=" + FILE, "-version")
            .redirectErrorStream(true)
            .start();
        final String output = new String(java.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(java.waitFor(60, TimeUnit.SECONDS), output);
        assertEquals(0, java.exitValue(), output);
        assertTrue(output.contains(directives + " compiler directives added"), directives + " directives: " + output);
        assertFalse(output.toLowerCase().contains("error"), output);
    }
}
