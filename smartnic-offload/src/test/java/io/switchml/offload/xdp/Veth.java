package io.switchml.offload.xdp;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;

/**
 * A veth pair in this process's network namespace for attach tests, with names unique to this JVM. Creating one
 * needs CAP_NET_ADMIN; a test without it fails saying so.
 */
final class Veth implements AutoCloseable
{
    final String name;
    final String peer;

    Veth(final String tag)
    {
        this(tag, 1500);
    }

    /**
     * @param mtu of both ends.
     */
    Veth(final String tag, final int mtu)
    {
        final long pid = ProcessHandle.current().pid() % 100_000;
        name = "sml" + tag + pid + "a";
        peer = "sml" + tag + pid + "b";
        run("ip", "link", "del", name);
        // the MTU in the same command: an appliance watching for the interface never sees it at another MTU
        if (run("ip", "link", "add", name, "mtu", Integer.toString(mtu), "type", "veth", "peer", "name", peer, "mtu",
            Integer.toString(mtu)) != 0)
        {
            throw new AssertionError("cannot create veth " + name + " at MTU " + mtu + ": XDP tests need root (CAP_NET_ADMIN, CAP_BPF)");
        }
        run("ip", "link", "set", name, "up");
        run("ip", "link", "set", peer, "up");
    }

    /**
     * Run a command, return its exit code.
     */
    static int run(final String... command)
    {
        try
        {
            final Process process = new ProcessBuilder(List.of(command)).redirectErrorStream(true).start();
            process.getInputStream().readAllBytes();
            return process.waitFor();
        }
        catch (final IOException ex)
        {
            throw new AssertionError("cannot run " + String.join(" ", command) + ": " + ex.getMessage(), ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return -1;
        }
    }

    static String output(final String... command)
    {
        try
        {
            final Process process = new ProcessBuilder(List.of(command)).redirectErrorStream(true).start();
            final String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            process.waitFor();
            return out;
        }
        catch (final IOException | InterruptedException ex)
        {
            throw new AssertionError("cannot run " + String.join(" ", command), ex);
        }
    }

    /**
     * Attach the pass-everything test program (not ours, as far as the appliance can tell) in driver mode, as root
     * through iproute2.
     *
     * @return its program id.
     */
    int attachForeignProgram() throws BpfException
    {
        final Path pass = BpfObject.extractResource("/bpf/switchml_pass.o");
        if (run("ip", "link", "set", "dev", name, "xdpdrv", "obj", pass.toString(), "sec", "xdp") != 0)
        {
            throw new AssertionError("cannot attach the pass program to " + name);
        }
        return XdpAttachment.query(name).orElseThrow().id();
    }

    /**
     * Put the pass-everything test program in place of whatever program is attached, in one step ({@code ip -force}).
     *
     * @return its program id.
     */
    int replaceWithForeignProgram() throws BpfException
    {
        final Path pass = BpfObject.extractResource("/bpf/switchml_pass.o");
        if (run("ip", "-force", "link", "set", "dev", name, "xdpdrv", "obj", pass.toString(), "sec", "xdp") != 0)
        {
            throw new AssertionError("cannot replace the program on " + name + " with the pass program");
        }
        return XdpAttachment.query(name).orElseThrow().id();
    }

    public void close()
    {
        run("ip", "link", "del", name);
    }
}
