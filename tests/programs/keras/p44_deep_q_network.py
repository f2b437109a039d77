"""keras.io/examples/rl/deep_q_network_breakout, typed with ``tf.GradientTape`` -> ``md.GradientTape``: a Q
network and its target copy (the example's ``Lambda`` transposing the stacked frames, three ``Conv2D``s, two
``Dense``), epsilon-greedy actions (``keras.ops.argmax(action_probs[0]).numpy()`` once greedy), a replay memory
sampled with ``np.random.choice``, targets from ``model_target.predict(state_next_sample)`` and
``keras.ops.amax`` added to the Python list of rewards, ``keras.ops.one_hot`` masks, a ``Huber`` loss, ``Adam``
with ``clipnorm=1.0`` applied in cross-replica context, and the target refreshed every few frames with
``model_target.set_weights(model.get_weights())``. Both models are built in ``strategy.scope()``.

The environment is a seeded synthetic one (random 4x12x12 frame stacks, a reward for matching a hidden
action) instead of gym's ``BreakoutNoFrameskip-v4``. Shrunk: frames 12x12, Conv2D(4/8/8), Dense(16), batch 8,
2 episodes of 16 frames, 8 random frames, an update every 2 frames, the target refreshed every 6.
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/rl/deep_q_network_breakout/"
num_actions = 4


class Frames:
    """Stacks of 4 random 12x12 frames; the reward is 1 when the action matches the frame's hidden one."""

    def __init__(self, seed, length=16):
        self.rng, self.length = np.random.RandomState(seed), length

    def reset(self):
        self.t = 0
        self.frame = self.rng.random((4, 12, 12)).astype("float32")
        return self.frame, {}

    def step(self, action):
        reward = float(int(self.frame.sum() * 10) % num_actions == action)
        self.t += 1
        self.frame = self.rng.random((4, 12, 12)).astype("float32")
        return self.frame, reward, self.t >= self.length, False, {}


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    np.random.seed(42)
    keras.utils.set_random_seed(42)
    env = Frames(seed=42)
    gamma = 0.99  # Discount factor for past rewards
    epsilon = 1.0  # Epsilon greedy parameter
    epsilon_min = 0.1  # Minimum epsilon greedy parameter
    epsilon_max = 1.0  # Maximum epsilon greedy parameter
    epsilon_interval = epsilon_max - epsilon_min  # Rate at which to reduce chance of random action being taken
    batch_size = 8  # Size of batch taken from replay buffer
    max_steps_per_episode = 100

    def create_q_model():
        # Network defined by the Deepmind paper
        return keras.Sequential([
            layers.Input(shape=(4, 12, 12)),
            layers.Lambda(lambda tensor: keras.ops.transpose(tensor, [0, 2, 3, 1]), output_shape=(12, 12, 4)),
            # Convolutions on the frames on the screen
            layers.Conv2D(4, 4, strides=2, activation="relu"),
            layers.Conv2D(8, 2, strides=1, activation="relu"),
            layers.Conv2D(8, 2, strides=1, activation="relu"),
            layers.Flatten(),
            layers.Dense(16, activation="relu"),
            layers.Dense(num_actions, activation="linear"),
        ])

    with strategy.scope():
        # The first model makes the predictions for Q-values which are used to make a action.
        model = create_q_model()
        # Build a target model for the prediction of future rewards.
        model_target = create_q_model()
        # In the Deepmind paper they use RMSProp however then Adam optimizer improves training time
        optimizer = keras.optimizers.Adam(learning_rate=0.005, clipnorm=1.0)
        # Using huber loss for stability
        loss_function = keras.losses.Huber()

    # Experience replay buffers
    action_history, state_history, state_next_history, rewards_history, done_history = [], [], [], [], []
    episode_reward_history, losses, greedy_actions = [], [], []
    frame_count = 0
    epsilon_random_frames = 8  # Number of frames to take random action and observe output
    epsilon_greedy_frames = 20.0  # Number of frames for exploration
    update_after_actions = 2  # Train the model after 2 actions
    update_target_network = 6  # How often to update the target network
    for episode_count in range(2 * scale):
        observation, _ = env.reset()
        state = np.array(observation)
        episode_reward = 0
        for timestep in range(1, max_steps_per_episode):
            frame_count += 1
            # Use epsilon-greedy for exploration
            if frame_count < epsilon_random_frames or epsilon > np.random.rand(1)[0]:
                # Take random action
                action = np.random.choice(num_actions)
            else:
                # Predict action Q-values
                # From environment state
                state_tensor = keras.ops.convert_to_tensor(state)
                state_tensor = keras.ops.expand_dims(state_tensor, 0)
                action_probs = model(state_tensor, training=False)
                # Take best action
                action = keras.ops.argmax(action_probs[0]).numpy()
                greedy_actions.append(int(action))
            # Decay probability of taking random action
            epsilon -= epsilon_interval / epsilon_greedy_frames
            epsilon = max(epsilon, epsilon_min)
            # Apply the sampled action in our environment
            state_next, reward, done, _, _ = env.step(action)
            state_next = np.array(state_next)
            episode_reward += reward
            # Save actions and states in replay buffer
            action_history.append(action)
            state_history.append(state)
            state_next_history.append(state_next)
            done_history.append(done)
            rewards_history.append(reward)
            state = state_next
            # Update every fourth frame and once batch size is over 32
            if frame_count % update_after_actions == 0 and len(done_history) > batch_size:
                # Get indices of samples for replay buffers
                indices = np.random.choice(range(len(done_history)), size=batch_size)
                # Using list comprehension to sample from replay buffer
                state_sample = np.array([state_history[i] for i in indices])
                state_next_sample = np.array([state_next_history[i] for i in indices])
                rewards_sample = [rewards_history[i] for i in indices]
                action_sample = [action_history[i] for i in indices]
                done_sample = keras.ops.convert_to_tensor([float(done_history[i]) for i in indices])
                # Build the updated Q-values for the sampled future states
                # Use the target model for stability
                future_rewards = model_target.predict(state_next_sample, verbose=0)
                # Q value = reward + discount factor * expected future reward
                updated_q_values = rewards_sample + gamma * keras.ops.amax(future_rewards, axis=1)
                # If final frame set the last value to -1
                updated_q_values = updated_q_values * (1 - done_sample) - done_sample
                # Create a mask so we only calculate loss on the updated Q-values
                masks = keras.ops.one_hot(action_sample, num_actions)
                with md.GradientTape() as tape:
                    # Train the model on the states and updated Q-values
                    q_values = model(state_sample)
                    # Apply the masks to the Q-values to get the Q-value for action taken
                    q_action = keras.ops.sum(keras.ops.multiply(q_values, masks), axis=1)
                    # Calculate loss between new Q-value and old Q-value
                    loss = loss_function(updated_q_values, q_action)
                # Backpropagation
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                losses.append(float(loss))
            if frame_count % update_target_network == 0:
                # update the the target network with new weights
                model_target.set_weights(model.get_weights())
            if done:
                break
        episode_reward_history.append(episode_reward)
    probe = np.random.RandomState(7).random((4, 4, 12, 12)).astype("float32")
    return {"_model": model_target, "episode_reward": episode_reward_history, "losses": losses,
            "greedy_actions": greedy_actions, "q": model.predict(probe, verbose=0),
            "q_target": model_target.predict(probe, verbose=0)}
