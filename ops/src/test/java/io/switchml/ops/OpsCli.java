package io.switchml.ops;

import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;

/**
 * Runs the ops CLI in-process, as {@code switchml ops ...} would, capturing stdout, stderr and the exit code.
 */
final class OpsCli
{
    /**
     * The outcome of one run.
     */
    record Result(int exitCode, String out, String err)
    {
        @Override
        public String toString()
        {
            return "exit " + exitCode + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
        }
    }

    private OpsCli()
    {
    }

    static Result run(final String... args)
    {
        return run(null, args);
    }

    /**
     * @param terminal pretend stdout is (true) or is not (false) a terminal; null leaves it to detection.
     */
    static Result run(final Boolean terminal, final String... args)
    {
        final OpsCommand ops = new OpsCommand();
        ops.terminalOverride = terminal;
        final CommandLine commandLine = io.switchml.protocol.UsageErrorHandler.install(new CommandLine(ops));
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final int exitCode = commandLine.execute(args);
        return new Result(exitCode, out.toString(), err.toString());
    }
}
