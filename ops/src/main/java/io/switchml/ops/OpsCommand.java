package io.switchml.ops;

import io.switchml.protocol.ControlProtocol;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.Callable;

/**
 * {@code switchml ops}: ask a running appliance for its health, jobs and counters.
 * Exit codes: 0 success, 1 the appliance answered with an error, 4 the appliance is not reachable.
 */
@Command(name = "ops", mixinStandardHelpOptions = true,
    description = "Operator commands against a running appliance.",
    subcommands = {OpsCommand.Health.class, OpsCommand.Jobs.class, OpsCommand.Counters.class})
public final class OpsCommand implements Runnable
{
    static final int UNREACHABLE = 4;

    @Option(names = "--host", description = "Appliance host (default ${DEFAULT-VALUE}).", defaultValue = "127.0.0.1",
        scope = CommandLine.ScopeType.INHERIT)
    String host;

    @Option(names = "--control-port", description = "Appliance control port (default ${DEFAULT-VALUE}).",
        defaultValue = "7470", scope = CommandLine.ScopeType.INHERIT)
    int controlPort;

    @Option(names = "--json", description = "Print JSON instead of text.", scope = CommandLine.ScopeType.INHERIT)
    boolean json;

    public void run()
    {
        new CommandLine(this).usage(System.out);
    }

    abstract static class Query implements Callable<Integer>
    {
        @CommandLine.ParentCommand
        OpsCommand parent;

        public Integer call()
        {
            try (ControlClient client = new ControlClient(parent.host, parent.controlPort, 3000))
            {
                return query(client);
            }
            catch (final IOException ex)
            {
                System.err.println("switchml ops: appliance at " + parent.host + ":" + parent.controlPort +
                    " is not reachable: " + ex.getMessage());
                return UNREACHABLE;
            }
        }

        abstract int query(ControlClient client) throws IOException;

        void print(final Map<String, String> fields)
        {
            if (parent.json)
            {
                System.out.println(toJson(fields));
            }
            else
            {
                fields.forEach((key, value) ->
                {
                    if (!key.isEmpty())
                    {
                        System.out.println(key + ": " + value);
                    }
                });
            }
        }
    }

    static String toJson(final Map<String, String> fields)
    {
        final StringJoiner joiner = new StringJoiner(", ", "{", "}");
        fields.forEach((key, value) ->
        {
            if (!key.isEmpty())
            {
                joiner.add("\"" + key + "\": " + (value.matches("-?\\d+(\\.\\d+)?") ? value : "\"" + value.replace("\"", "\\\"") + "\""));
            }
        });
        return joiner.toString();
    }

    @Command(name = "health", mixinStandardHelpOptions = true, description = "Is the appliance up; uptime, jobs, memory used.")
    static final class Health extends Query
    {
        int query(final ControlClient client) throws IOException
        {
            final Map<String, String> reply = ControlProtocol.parse(client.request(ControlProtocol.HEALTH));
            print(reply);
            return ControlProtocol.OK.equals(reply.get("")) ? 0 : 1;
        }
    }

    @Command(name = "jobs", mixinStandardHelpOptions = true, description = "List jobs with their state and geometry.")
    static final class Jobs extends Query
    {
        int query(final ControlClient client) throws IOException
        {
            final List<String> lines = client.requestUntilEnd(ControlProtocol.JOBS, ControlProtocol.END);
            if (parent.json)
            {
                final StringJoiner joiner = new StringJoiner(", ", "[", "]");
                lines.forEach(line -> joiner.add(toJson(ControlProtocol.parse(line))));
                System.out.println(joiner);
            }
            else if (lines.isEmpty())
            {
                System.out.println("no jobs");
            }
            else
            {
                lines.forEach(line -> System.out.println(line.substring(line.indexOf(' ') + 1)));
            }
            return 0;
        }
    }

    @Command(name = "counters", mixinStandardHelpOptions = true, description = "Print the appliance's counters.")
    static final class Counters extends Query
    {
        int query(final ControlClient client) throws IOException
        {
            print(ControlProtocol.parse(client.request(ControlProtocol.STATS)));
            return 0;
        }
    }

    public static void main(final String[] args)
    {
        System.exit(new CommandLine(new OpsCommand()).execute(args));
    }
}
