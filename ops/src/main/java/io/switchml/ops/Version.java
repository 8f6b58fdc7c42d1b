package io.switchml.ops;

import picocli.CommandLine;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/**
 * The release of this CLI, from {@code version.properties} (filled in by the build).
 */
final class Version implements CommandLine.IVersionProvider
{
    private static final String VERSION = load();

    /**
     * @return e.g. "0.1.0-SNAPSHOT", or "unknown" when the resource is missing.
     */
    static String version()
    {
        return VERSION;
    }

    public String[] getVersion()
    {
        return new String[] {io.switchml.protocol.BuildInfo.describe()};
    }

    private static String load()
    {
        try (InputStream in = Version.class.getResourceAsStream("version.properties"))
        {
            if (in == null)
            {
                return "unknown";
            }
            final Properties properties = new Properties();
            properties.load(in);
            final String version = properties.getProperty("version", "unknown");
            return version.startsWith("${") ? "unknown" : version;
        }
        catch (final IOException ex)
        {
            return "unknown";
        }
    }
}
