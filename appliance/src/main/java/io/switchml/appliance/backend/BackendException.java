package io.switchml.appliance.backend;

/**
 * A backend could not do what was asked; the message names the backend's cause and goes to operators and
 * clients as is.
 */
public final class BackendException extends Exception
{
    public BackendException(final String message)
    {
        super(message);
    }

    public BackendException(final String message, final Throwable cause)
    {
        super(message, cause);
    }
}
