package io.switchml.protocol;

import java.util.List;
import java.util.Random;

/**
 * Seeded mutation of valid text lines for the fuzz tests of what a stranger can send as text (the control-line parser
 * here, the appliance's control channel over TCP): a random number of edits, each inserting, deleting or replacing a
 * character from an alphabet, or one of the grammar-specific edits a test adds (an oversized field, a run of '=',
 * a truncation). Shared through this module's test jar so that the tests mutate the same way.
 */
public final class LineMutator
{
    /** One grammar-specific edit at a position of the line. */
    @FunctionalInterface
    public interface Edit
    {
        void apply(StringBuilder text, int at, Random random);
    }

    private final String alphabet;
    private final int minEdits;
    private final int maxEdits;
    private final List<Edit> edits;

    /**
     * @param alphabet characters to insert and substitute.
     * @param minEdits fewest edits per line.
     * @param maxEdits most edits per line.
     * @param edits    further edits, drawn with the same weight as each of the three character edits.
     */
    public LineMutator(final String alphabet, final int minEdits, final int maxEdits, final Edit... edits)
    {
        this.alphabet = alphabet;
        this.minEdits = minEdits;
        this.maxEdits = maxEdits;
        this.edits = List.of(edits);
    }

    public String mutate(final String line, final Random random)
    {
        final StringBuilder text = new StringBuilder(line);
        final int count = minEdits + random.nextInt(maxEdits - minEdits + 1);
        for (int m = 0; m < count; m++)
        {
            final int at = text.isEmpty() ? 0 : random.nextInt(text.length());
            final int edit = random.nextInt(3 + edits.size());
            switch (edit)
            {
                case 0 -> text.insert(at, alphabet.charAt(random.nextInt(alphabet.length())));
                case 1 ->
                {
                    if (!text.isEmpty())
                    {
                        text.deleteCharAt(at);
                    }
                }
                case 2 ->
                {
                    if (!text.isEmpty())
                    {
                        text.setCharAt(at, alphabet.charAt(random.nextInt(alphabet.length())));
                    }
                }
                default -> edits.get(edit - 3).apply(text, at, random);
            }
        }
        return text.toString();
    }
}
