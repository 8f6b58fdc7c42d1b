package io.switchml.dist;

import io.switchml.protocol.BuildInfo;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Every command answers --version with the one string the build wrote: release, commit and build time.
 */
class VersionTest
{
    @ParameterizedTest
    @ValueSource(strings = {"--version", "demo --version", "appliance --version", "worker --version", "worker run --version",
        "worker bench --version", "worker serve --version", "ops --version", "ops status --version", "ops jobs --version"})
    void everyCommandPrintsTheBuildsOneVersionString(final String arguments)
    {
        final String[] args = arguments.split(" ");
        final CommandLine commandLine = SwitchMl.commandLine(args);
        final StringWriter out = new StringWriter();
        commandLine.setOut(new PrintWriter(out));
        assertEquals(0, commandLine.execute(args), arguments);
        assertEquals(BuildInfo.describe(), out.toString().strip(), arguments);
        assertTrue(BuildInfo.describe().matches("switchml \\d+\\.\\d+\\.\\d+\\S* \\(commit [0-9a-f]{7}(-dirty)?, built " +
            "\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ\\)"), BuildInfo.describe());
    }
}
