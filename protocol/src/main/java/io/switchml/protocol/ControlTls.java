package io.switchml.protocol;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SNIHostName;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.Collection;
import java.util.List;

/**
 * TLS for the control channel, with the JDK's own implementation (JSSE): the appliance serves with a PKCS12 keystore
 * (certificate and key, as {@code openssl pkcs12 -export} or {@code keytool} write it) and a password file; workers
 * and {@code ops} verify it against a PEM file of trusted certificates (the appliance's own self-signed certificate,
 * or the CA that signed it), host name or IP address included. TLS 1.3 and 1.2 only.
 */
public final class ControlTls
{
    private static final String[] PROTOCOLS = {"TLSv1.3", "TLSv1.2"};

    private ControlTls()
    {
    }

    /**
     * The appliance's TLS context.
     *
     * @throws IllegalArgumentException naming the file when the keystore or its password cannot be read.
     */
    public static SSLContext serverContext(final Path keystore, final Path passwordFile)
    {
        return serverContext(keystore, passwordFile, null);
    }

    /**
     * The appliance's TLS context; with {@code clientCaPem}, clients must present a certificate that it signed (or that
     * it holds itself) — the server socket must then require client authentication.
     *
     * @throws IllegalArgumentException naming the file when the keystore, its password or the CA file cannot be read.
     */
    public static SSLContext serverContext(final Path keystore, final Path passwordFile, final Path clientCaPem)
    {
        try
        {
            final SSLContext context = SSLContext.getInstance("TLS");
            context.init(keyManagers(keystore, passwordFile), clientCaPem == null ? null : trustManagers(clientCaPem), null);
            return context;
        }
        catch (final GeneralSecurityException ex)
        {
            throw new IllegalArgumentException("cannot make a TLS context: " + ex.getMessage(), ex);
        }
    }

    /**
     * The key managers of a PKCS12 keystore (a certificate and its key), for TLS outside this class (gRPC to a switch).
     *
     * @throws IllegalArgumentException naming both files when the keystore cannot be opened with the password, and
     *                                  naming the file when group or others may read or write either (they hold the key).
     */
    public static javax.net.ssl.KeyManager[] keyManagers(final Path keystore, final Path passwordFile)
    {
        try
        {
            SecretFiles.requirePrivate(passwordFile, "TLS password file");
            SecretFiles.requirePrivate(keystore, "TLS keystore");
            final char[] password = Files.readString(passwordFile, StandardCharsets.UTF_8).strip().toCharArray();
            final KeyStore store = KeyStore.getInstance("PKCS12");
            try (InputStream in = Files.newInputStream(keystore))
            {
                store.load(in, password);
            }
            final KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            keys.init(store, password);
            return keys.getKeyManagers();
        }
        catch (final IOException | GeneralSecurityException ex)
        {
            throw new IllegalArgumentException("cannot load the TLS keystore " + keystore + " with the password in " +
                passwordFile + ": " + ex.getMessage(), ex);
        }
    }

    /**
     * Protocols the appliance's server socket allows.
     */
    public static String[] protocols()
    {
        return PROTOCOLS.clone();
    }

    /**
     * A client context that trusts the certificates of a PEM file.
     *
     * @throws IllegalArgumentException naming the file when it holds no certificate or cannot be read.
     */
    public static SSLContext clientContext(final Path trustedPem)
    {
        return clientContext(trustedPem, null, null);
    }

    /**
     * A client context that trusts the certificates of a PEM file and, with a keystore, presents its certificate.
     */
    public static SSLContext clientContext(final Path trustedPem, final Path keystore, final Path passwordFile)
    {
        try
        {
            final SSLContext context = SSLContext.getInstance("TLS");
            context.init(keystore == null ? null : keyManagers(keystore, passwordFile), trustManagers(trustedPem), null);
            return context;
        }
        catch (final GeneralSecurityException ex)
        {
            throw new IllegalArgumentException("cannot make a TLS context: " + ex.getMessage(), ex);
        }
    }

    /**
     * Trust managers that trust exactly the certificates of a PEM file, for TLS outside this class (gRPC to a switch).
     *
     * @throws IllegalArgumentException naming the file when it holds no certificate or cannot be read.
     */
    public static javax.net.ssl.TrustManager[] trustManagers(final Path trustedPem)
    {
        try (InputStream in = Files.newInputStream(trustedPem))
        {
            final Collection<? extends Certificate> certificates = CertificateFactory.getInstance("X.509").generateCertificates(in);
            if (certificates.isEmpty())
            {
                throw new IllegalArgumentException("no certificate in " + trustedPem);
            }
            final KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int i = 0;
            for (final Certificate certificate : certificates)
            {
                store.setCertificateEntry("trusted-" + i++, certificate);
            }
            final TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            trust.init(store);
            return trust.getTrustManagers();
        }
        catch (final IOException | GeneralSecurityException ex)
        {
            throw new IllegalArgumentException("cannot read trusted certificates from " + trustedPem + ": " + ex.getMessage(), ex);
        }
    }

    /**
     * Connect to a control endpoint: plain TCP when {@code trustedPem} is null, else TLS verified against it (the
     * certificate must name {@code host}), the handshake done before this returns.
     *
     * @throws IOException naming the endpoint and the trusted file when the connection or the handshake fails.
     */
    public static Socket connect(final String host, final int port, final int timeoutMs, final Path trustedPem)
        throws IOException
    {
        return connect(host, port, timeoutMs, trustedPem, null, null);
    }

    /**
     * As {@link #connect(String, int, int, Path)}, presenting the certificate of {@code keystore} (PKCS12, password in
     * {@code passwordFile}) when the appliance asks for one (mutual TLS); null for none.
     */
    public static Socket connect(final String host, final int port, final int timeoutMs, final Path trustedPem,
        final Path keystore, final Path passwordFile) throws IOException
    {
        final Socket plain = new Socket();
        try
        {
            plain.setTcpNoDelay(true);
            plain.connect(new InetSocketAddress(host, port), timeoutMs);
            if (trustedPem == null)
            {
                return plain;
            }
            final SSLSocket socket = (SSLSocket)clientContext(trustedPem, keystore, passwordFile).getSocketFactory()
                .createSocket(plain, host, port, true);
            final SSLParameters parameters = socket.getSSLParameters();
            parameters.setEndpointIdentificationAlgorithm("HTTPS");
            parameters.setProtocols(PROTOCOLS);
            if (!Character.isDigit(host.charAt(0)) && host.indexOf(':') < 0)
            {
                parameters.setServerNames(List.of(new SNIHostName(host)));
            }
            socket.setSSLParameters(parameters);
            final int before = plain.getSoTimeout();
            socket.setSoTimeout(timeoutMs);
            try
            {
                // with TLS 1.3 a client certificate the appliance refuses is reported at the first read, as an
                // SSLException naming the alert (certificate_required, bad_certificate)
                socket.startHandshake();
            }
            catch (final IOException ex)
            {
                socket.close();
                throw new IOException("TLS handshake with the control endpoint " + host + ":" + port + " failed (trusting " +
                    trustedPem + "): " + ex.getMessage(), ex);
            }
            socket.setSoTimeout(before);
            return socket;
        }
        catch (final IOException | RuntimeException ex)
        {
            plain.close();
            throw ex;
        }
    }
}
