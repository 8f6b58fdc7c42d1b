package io.switchml.dist;

import io.switchml.protocol.Json;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

/**
 * A usage error of any switchml command prints the one wrong thing and where to read more, not the whole usage
 * help; with --json, one JSON object on stdout. Exit code 2.
 */
class UsageErrorTest
{
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "appliance --bogus          | switchml appliance: Unknown option: '--bogus'         | switchml appliance",
        "worker serve --world 2     | switchml worker serve: Missing required option: '--rank=<rank>' | switchml worker serve",
        "ops status --jsn           | switchml ops status: Unknown option: '--jsn'          | switchml ops status",
        "demo --workers many        | switchml demo: Invalid value for option '--workers': 'many' is not an int | switchml demo"})
    void oneLineAndAHintOnStderr(final String arguments, final String firstLine, final String command)
    {
        final String[] args = arguments.strip().split(" ");
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final int exitCode = run(args, out, err);
        assertEquals(2, exitCode, err::toString);
        assertEquals("", out.toString());
        final List<String> lines = err.toString().lines().toList();
        assertEquals(firstLine.strip(), lines.getFirst(), err::toString);
        assertEquals("Try '" + command.strip() + " --help' for more information.", lines.getLast(), err::toString);
        assertFalse(err.toString().contains("Usage:"), err::toString);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "ops --json jobs list --bogus | switchml ops jobs list",
        "ops counters --json --type cluster | switchml ops counters"})
    void withJsonOneObjectOnStdout(final String arguments, final String command)
    {
        final String[] args = arguments.strip().split(" ");
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        assertEquals(2, run(args, out, err), out::toString);
        assertEquals("", err.toString());
        final Map<?, ?> error = assertInstanceOf(Map.class, Json.parse(out.toString()), out::toString);
        assertEquals(2L, error.get("exit_code"), out::toString);
        assertEquals("Try '" + command.strip() + " --help' for more information.", error.get("hint"), out::toString);
        assertInstanceOf(String.class, error.get("error"), out::toString);
    }

    private static int run(final String[] args, final StringWriter out, final StringWriter err)
    {
        final var commandLine = SwitchMl.commandLine(args);
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        return commandLine.execute(args);
    }
}
