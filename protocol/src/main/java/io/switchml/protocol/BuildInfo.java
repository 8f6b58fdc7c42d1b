package io.switchml.protocol;

import picocli.CommandLine;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/**
 * What this build is: the release, the commit and the build time, from {@code build.properties}, which the build fills
 * in (the commit through git-commit-id-maven-plugin; "unknown" when built outside a git checkout). Every command's
 * {@code --version} prints {@link #describe()} through {@link VersionProvider}, so the launcher, the appliance, the
 * worker and ops agree.
 */
public final class BuildInfo
{
    private static final Properties PROPERTIES = load();

    private BuildInfo()
    {
    }

    /**
     * @return the release, e.g. "0.1.0-SNAPSHOT".
     */
    public static String version()
    {
        return value("version");
    }

    /**
     * @return the abbreviated commit, with "-dirty" when the tree had uncommitted changes, or "unknown".
     */
    public static String commit()
    {
        final String commit = value("commit");
        return "true".equals(value("dirty")) && !"unknown".equals(commit) ? commit + "-dirty" : commit;
    }

    /**
     * @return when it was built (UTC, ISO 8601), or "unknown".
     */
    public static String buildTime()
    {
        return value("buildTime");
    }

    /**
     * @return "switchml 0.1.0-SNAPSHOT (commit 1a2b3c4, built 2026-11-25T15:30:00Z)".
     */
    public static String describe()
    {
        return "switchml " + version() + " (commit " + commit() + ", built " + buildTime() + ")";
    }

    private static String value(final String key)
    {
        final String value = PROPERTIES.getProperty(key, "unknown");
        return value.isEmpty() || value.startsWith("${") ? "unknown" : value;
    }

    private static Properties load()
    {
        final Properties properties = new Properties();
        try (InputStream in = BuildInfo.class.getResourceAsStream("build.properties"))
        {
            if (in != null)
            {
                properties.load(in);
            }
        }
        catch (final IOException ignore)
        {
            // every value reads "unknown"
        }
        return properties;
    }

    /**
     * picocli's version provider for every command.
     */
    public static final class VersionProvider implements CommandLine.IVersionProvider
    {
        public String[] getVersion()
        {
            return new String[] {describe()};
        }
    }
}
