package io.switchml.offload.tofino.p4runtime;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Self-signed certificates made with the JDK's keytool, as an operator would for a switch's P4Runtime server or a
 * controller: NAME.p12 (PKCS12, key and certificate), NAME.password and NAME.pem (the certificate) in a directory.
 */
public final class SwitchCertificates
{
    private SwitchCertificates()
    {
    }

    /**
     * @return the PEM of a new certificate for 127.0.0.1 and localhost; its keystore and password file lie beside it.
     */
    public static Path create(final Path dir, final String name) throws Exception
    {
        return create(dir, name, "ip:127.0.0.1,dns:localhost");
    }

    /**
     * @param san keytool's subject alternative names ("dns:switch.example" for one that does not name this host).
     */
    public static Path create(final Path dir, final String name, final String san) throws Exception
    {
        final String keytool = Path.of(ProcessHandle.current().info().command().orElseThrow()).resolveSibling("keytool").toString();
        final Path keystore = keystore(dir, name);
        final Path pem = dir.resolve(name + ".pem");
        run(keytool, "-genkeypair", "-alias", name, "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=" + name,
            "-ext", "SAN=" + san, "-validity", "2", "-storetype", "PKCS12", "-keystore", keystore.toString(),
            "-storepass", "pass-" + name, "-keypass", "pass-" + name);
        run(keytool, "-exportcert", "-rfc", "-alias", name, "-keystore", keystore.toString(), "-storepass", "pass-" + name,
            "-file", pem.toString());
        Files.writeString(password(dir, name), "pass-" + name + "\n");
        // mode 600, as ControlTls.keyManagers requires of a keystore and its password file
        for (final Path secret : new Path[] {keystore, password(dir, name)})
        {
            Files.setPosixFilePermissions(secret, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        }
        return pem;
    }

    public static Path keystore(final Path dir, final String name)
    {
        return dir.resolve(name + ".p12");
    }

    public static Path password(final Path dir, final String name)
    {
        return dir.resolve(name + ".password");
    }

    private static void run(final String... command) throws Exception
    {
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (process.waitFor() != 0)
        {
            throw new IllegalStateException(String.join(" ", command) + " failed: " + output);
        }
    }
}
