package io.switchml.appliance.backend;

import io.switchml.protocol.ControlProtocol;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.ServiceLoader;
import java.util.TreeMap;
import java.util.Map;

/**
 * The backends an appliance can place jobs on: {@code software} (its own shards) and every {@link BackendProvider}
 * on the class path, found with {@link ServiceLoader}.
 */
public final class Backends
{
    public static final String SOFTWARE = "software";
    /** Option name prefixes that are never backend names (existing option groups). */
    private static final List<String> RESERVED = List.of("multicast", "native", "journal", "histogram", "shard", "tenant",
        "default", "slot", "join", "memory", "socket", "loss", "control", "data", "http", "bind", "dir", "transport", "mac",
        "shards", "backends");

    private Backends()
    {
    }

    /**
     * @return every provider on the class path by name.
     */
    public static Map<String, BackendProvider> providers()
    {
        final Map<String, BackendProvider> providers = new TreeMap<>();
        for (final BackendProvider provider : ServiceLoader.load(BackendProvider.class))
        {
            providers.put(provider.name(), provider);
        }
        return providers;
    }

    /**
     * @return whether a name could be an offload backend's option prefix.
     */
    public static boolean isOffloadName(final String name)
    {
        return name.matches("[a-z][a-z0-9_-]*") && !RESERVED.contains(name) && !SOFTWARE.equals(name) &&
            !ControlProtocol.BACKEND_AUTO.equals(name);
    }

    /**
     * @return the names in a comma-separated preference list, trimmed and lower-cased.
     */
    public static List<String> parseList(final String list)
    {
        final List<String> names = new ArrayList<>();
        for (final String part : list.split(","))
        {
            final String name = part.strip().toLowerCase(Locale.ROOT);
            if (!name.isEmpty())
            {
                names.add(name);
            }
        }
        return names;
    }

    /**
     * Check a preference list and the backends that options were given for.
     *
     * @throws IllegalArgumentException naming the option and the unknown or repeated name.
     */
    public static void validate(final String option, final String list, final Collection<String> optionBackends)
    {
        final List<String> names = parseList(list);
        final Map<String, BackendProvider> providers = providers();
        final List<String> known = new ArrayList<>(providers.keySet());
        known.add(SOFTWARE);
        if (names.isEmpty())
        {
            throw new IllegalArgumentException(option + " names no backend (known: " + String.join(", ", known) + ")");
        }
        for (int i = 0; i < names.size(); i++)
        {
            final String name = names.get(i);
            if (!known.contains(name))
            {
                throw new IllegalArgumentException(option + " names unknown backend '" + name + "' (known on this class path: " +
                    String.join(", ", known) + ")");
            }
            if (names.subList(0, i).contains(name))
            {
                throw new IllegalArgumentException(option + " names backend '" + name + "' twice");
            }
        }
        for (final String backend : optionBackends)
        {
            if (!names.contains(backend))
            {
                throw new IllegalArgumentException("options switchml.appliance." + backend + ".* are set but " + option +
                    " does not name '" + backend + "'");
            }
        }
    }
}
