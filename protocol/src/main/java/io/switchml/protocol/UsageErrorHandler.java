package io.switchml.protocol;

import picocli.CommandLine;
import picocli.CommandLine.ParameterException;

import java.io.PrintWriter;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What every command prints for a usage error (an unknown option, a bad value, a missing parameter), the way
 * GNU tools and kubectl do: the one wrong thing, picocli's "did you mean" suggestions when there are any, and where
 * to read more, on stderr, instead of picocli's default of the message followed by the whole usage help. With
 * {@code --json} on the command line, the error is one JSON object on stdout instead:
 * {@code {"error": "Unknown option: '--jsn'", "exit_code": 2, "hint": "Try 'switchml ops status --help' ..."}}.
 * The exit code is the command's exit code for invalid input (2).
 */
public final class UsageErrorHandler implements CommandLine.IParameterExceptionHandler
{
    /** The option that asks for JSON output. */
    public static final String JSON_OPTION = "--json";

    /**
     * Install on this command line and every subcommand it has now.
     *
     * @param commandLine the command line, with its subcommands added.
     * @return the command line.
     */
    public static CommandLine install(final CommandLine commandLine)
    {
        return commandLine.setParameterExceptionHandler(new UsageErrorHandler());
    }

    @Override
    public int handleParseException(final ParameterException ex, final String[] args)
    {
        final CommandLine commandLine = ex.getCommandLine();
        final String name = commandLine.getCommandSpec().qualifiedName();
        final String hint = "Try '" + name + " --help' for more information.";
        final int exitCode = commandLine.getCommandSpec().exitCodeOnInvalidInput();
        if (wantsJson(args))
        {
            final Map<String, Object> error = new LinkedHashMap<>();
            error.put("error", ex.getMessage());
            error.put("exit_code", exitCode);
            error.put("hint", hint);
            final PrintWriter out = commandLine.getOut();
            out.println(Json.write(error));
            out.flush();
            return exitCode;
        }
        final PrintWriter err = commandLine.getErr();
        err.println(name + ": " + ex.getMessage());
        CommandLine.UnmatchedArgumentException.printSuggestions(ex, err);
        err.println(hint);
        err.flush();
        return exitCode;
    }

    private static boolean wantsJson(final String[] args)
    {
        for (final String arg : args)
        {
            if ("--".equals(arg))
            {
                return false;
            }
            if (JSON_OPTION.equals(arg))
            {
                return true;
            }
        }
        return false;
    }
}
