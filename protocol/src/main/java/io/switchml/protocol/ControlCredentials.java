package io.switchml.protocol;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;

/**
 * The control plane's credentials file: one credential per line, {@code ROLE NAME SECRET}, where ROLE is
 * {@code operator} (may create jobs for any tenant, abort any job, read every job) or {@code tenant} (NAME is the
 * tenant: may create, abort and read that tenant's jobs only). Blank lines and lines starting with {@code #} are
 * ignored. A secret is 16 to 128 characters of [0-9A-Za-z_-]. Clients send it as {@code auth=SECRET}.
 * <p>
 * The appliance reads the whole file and refuses one that other users may read ({@link #load}); a worker or
 * {@code ops} picks one secret out of the same format ({@link #secretFor}). A line-based format of our own: there
 * is no library for it, and it has to be read by three processes with the same rules.
 */
public final class ControlCredentials
{
    public static final String OPERATOR = "operator";
    public static final String TENANT = "tenant";
    private static final String SECRET_PATTERN = "[0-9A-Za-z_\\-]{16,128}";

    /**
     * One line of the file.
     */
    public record Credential(String role, String name, String secret)
    {
        public boolean isOperator()
        {
            return OPERATOR.equals(role);
        }

        @Override
        public String toString()
        {
            return role + " " + name;
        }
    }

    private final List<Credential> credentials;

    private ControlCredentials(final List<Credential> credentials)
    {
        this.credentials = List.copyOf(credentials);
    }

    /**
     * Read and check a credentials file for the appliance.
     *
     * @throws IllegalArgumentException naming the file and the line when it is missing, readable by group or others,
     *                                  empty, or malformed.
     */
    public static ControlCredentials load(final Path file)
    {
        try
        {
            SecretFiles.requirePrivate(file, "credentials file");
            final List<Credential> parsed = parse(Files.readAllLines(file, StandardCharsets.UTF_8), file.toString());
            if (parsed.isEmpty())
            {
                throw new IllegalArgumentException("credentials file " + file + " holds no credential");
            }
            return new ControlCredentials(parsed);
        }
        catch (final IOException ex)
        {
            throw new IllegalArgumentException("cannot read credentials file " + file + ": " + ex, ex);
        }
    }

    /**
     * For tests and embedded use.
     */
    public static ControlCredentials of(final List<Credential> credentials)
    {
        return new ControlCredentials(credentials);
    }

    private static List<Credential> parse(final List<String> lines, final String where)
    {
        final List<Credential> parsed = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++)
        {
            final String line = lines.get(i).strip();
            if (line.isEmpty() || line.startsWith("#"))
            {
                continue;
            }
            final String[] fields = line.split("\\s+");
            if (fields.length != 3 || !(OPERATOR.equals(fields[0]) || TENANT.equals(fields[0])) ||
                !fields[1].matches("[0-9A-Za-z_.\\-]{1,64}") || !fields[2].matches(SECRET_PATTERN))
            {
                throw new IllegalArgumentException(where + " line " + (i + 1) + ": expected 'operator|tenant NAME SECRET' " +
                    "with a secret of 16 to 128 characters of [0-9A-Za-z_-]");
            }
            for (int j = 0; j < parsed.size(); j++)
            {
                if (parsed.get(j).secret().equals(fields[2]))
                {
                    // the first would win: a tenant line repeating the operator's secret would change roles unseen
                    throw new IllegalArgumentException(where + " line " + (i + 1) + ": the same secret as " +
                        parsed.get(j).role() + " '" + parsed.get(j).name() + "'; every credential needs a secret of its own");
                }
            }
            parsed.add(new Credential(fields[0], fields[1], fields[2]));
        }
        return parsed;
    }

    /**
     * @return the credential whose secret this is (compared in constant time), or null.
     */
    public Credential find(final String secret)
    {
        if (secret == null)
        {
            return null;
        }
        final byte[] given = secret.getBytes(StandardCharsets.UTF_8);
        Credential found = null;
        for (final Credential credential : credentials)
        {
            if (MessageDigest.isEqual(given, credential.secret().getBytes(StandardCharsets.UTF_8)) && found == null)
            {
                found = credential;
            }
        }
        return found;
    }

    public int size()
    {
        return credentials.size();
    }

    /**
     * Pick a client's secret out of a credentials file: the first {@code role} line, and for {@code tenant} the one of
     * that tenant when there is one (else the first operator line, which may act for any tenant).
     *
     * @param tenant the tenant for {@code tenant}, ignored for {@code operator}.
     * @throws IllegalArgumentException naming the file when it has none that fits.
     */
    public static String secretFor(final Path file, final String role, final String tenant)
    {
        final List<Credential> parsed;
        try
        {
            parsed = parse(Files.readAllLines(file, StandardCharsets.UTF_8), file.toString());
        }
        catch (final IOException ex)
        {
            throw new IllegalArgumentException("cannot read credentials file " + file + ": " + ex, ex);
        }
        for (final Credential credential : parsed)
        {
            if (role.equals(credential.role()) && (OPERATOR.equals(role) || credential.name().equals(tenant)))
            {
                return credential.secret();
            }
        }
        if (TENANT.equals(role))
        {
            for (final Credential credential : parsed)
            {
                if (credential.isOperator())
                {
                    return credential.secret();
                }
            }
        }
        throw new IllegalArgumentException("credentials file " + file + " has no " +
            (TENANT.equals(role) ? "credential of tenant '" + tenant + "' or operator" : "operator credential"));
    }

    /**
     * @return true when the text is a well-formed secret.
     */
    public static boolean isSecret(final String text)
    {
        return text != null && text.matches(SECRET_PATTERN);
    }
}
